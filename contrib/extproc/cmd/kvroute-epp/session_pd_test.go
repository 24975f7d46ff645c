package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvroute/kvroute/contrib/extproc"
	"github.com/kvroute/kvroute/contrib/extproc/envoysim"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

// With --disagg-config and --session-config together the decode pick,
// which replaces the router's, weighs the session too: a request whose
// llm-d-session cookie names the second of two idle engines decodes there,
// where the decode pick's tie-break alone sends every request to the
// first. The decider's threshold keeps every prompt local.
func TestRunWithSessionAffinityUnderPD(t *testing.T) {
	defer leakcheck.Check(t)()
	var eps []string
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		eng, err := server.New(server.Config{Model: model,
			Engine: simengine.Config{BlockSize: 16, NumGPUBlocks: 256, PrefillTokensPerSecond: 1e6, DecodeStep: time.Millisecond}}, server.Options{})
		require.NoError(t, err)
		served := make(chan error, 1)
		go func() { served <- eng.Serve(ln) }()
		defer func() { _ = eng.Close(); <-served }()
		eps = append(eps, ln.Addr().String())
	}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte("model: "+model+"\nblockSize: 16\ndisableRender: true\nevents:\n  enabled: false\n"), 0o600))
	sessPath := filepath.Join(dir, "session.yaml")
	require.NoError(t, os.WriteFile(sessPath, []byte("ttl: 5m\nsetCookie: false\n"), 0o600))
	pdPath := filepath.Join(dir, "disagg.yaml")
	require.NoError(t, os.WriteFile(pdPath, []byte("nonCachedTokens: 1073741824\n"), 0o600))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, done := startEPP(t, ctx, "--endpoints", strings.Join(eps, ","), "--config", cfgPath,
		"--session-config", sessPath, "--disagg-config", pdPath)
	conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	upstream := &http.Client{Transport: &http.Transport{}}
	defer upstream.CloseIdleConnections()
	envoy := httptest.NewServer(envoysim.New(envoysim.Config{}, extprocv3.NewExternalProcessorClient(conn), upstream))
	defer envoy.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	post := func(cookie string, k int) string {
		req, err := http.NewRequest(http.MethodPost, envoy.URL+"/v1/completions",
			strings.NewReader(fmt.Sprintf(`{"model":"%s","prompt":"question %d","max_tokens":2}`, model, k)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: "llm-d-session", Value: cookie})
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		return resp.Header.Get(extproc.EndpointHeader)
	}
	require.Equal(t, eps[0], post("", 0), "idle engines alike: the first decode candidate")
	second := base64.StdEncoding.EncodeToString([]byte(eps[1]))
	for k := 1; k < 4; k++ {
		require.Equal(t, eps[1], post(second, k), "request %d", k)
	}

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after cancellation")
	}
}
