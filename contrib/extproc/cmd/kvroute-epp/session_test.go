package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
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

// --session-config is read with package session's strict rules before the
// picker starts.
func TestSessionConfigIsCheckedBeforeStarting(t *testing.T) {
	defer leakcheck.Check(t)()
	dir := t.TempDir()
	args := []string{"--endpoints", "127.0.0.1:8000", "--model", model,
		"--listen-host", "127.0.0.1", "--grpc-port", "0", "--grpc-health-port", "0", "--metrics-port", "0"}
	for content, want := range map[string]string{
		"ttll: 1m\n":           "ttll",
		"ttl: 60\n":            "ttl",
		"cookieMaxAge: -1s\n":  "cookieMaxAge",
		"headers: [\"a b\"]\n": "headers[0]",
	} {
		bad := filepath.Join(dir, "session.yaml")
		require.NoError(t, os.WriteFile(bad, []byte(content), 0o600))
		err := run(context.Background(), append(args, "--session-config", bad), io.Discard, io.Discard)
		require.ErrorContains(t, err, want, content)
	}
	err := run(context.Background(), append(args, "--session-config", filepath.Join(dir, "absent.yaml")), io.Discard, io.Discard)
	require.ErrorContains(t, err, "--session-config")
}

// kvroute-epp with --session-config behind an Envoy-behaving proxy and two
// simulated engines: a client that keeps cookies gets llm-d's session
// cookie on its first response and, sending it back, every later request
// goes to the same engine although no two share a block; a session header
// sticks too; the metrics count it.
func TestRunWithSessionAffinity(t *testing.T) {
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
	require.NoError(t, os.WriteFile(sessPath, []byte("ttl: 5m\n"), 0o600))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, done := startEPP(t, ctx, "--endpoints", strings.Join(eps, ","), "--config", cfgPath, "--session-config", sessPath)

	conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	upstream := &http.Client{Transport: &http.Transport{}}
	defer upstream.CloseIdleConnections()
	envoy := httptest.NewServer(envoysim.New(envoysim.Config{}, extprocv3.NewExternalProcessorClient(conn), upstream))
	defer envoy.Close()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Jar: jar}
	post := func(c *http.Client, h map[string]string, k int) *http.Response {
		req, err := http.NewRequest(http.MethodPost, envoy.URL+"/v1/completions",
			strings.NewReader(fmt.Sprintf(`{"model":"%s","prompt":"question %d of the session","max_tokens":2}`, model, k)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		return resp
	}
	resp := post(client, nil, 0)
	home := resp.Header.Get(extproc.EndpointHeader)
	require.Len(t, resp.Cookies(), 1)
	require.Equal(t, base64.StdEncoding.EncodeToString([]byte(home)), resp.Cookies()[0].Value)
	for k := 1; k < 8; k++ {
		resp := post(client, nil, k)
		require.Equal(t, home, resp.Header.Get(extproc.EndpointHeader), "request %d", k)
		require.Empty(t, resp.Cookies(), "request %d", k)
	}
	plain := &http.Client{Transport: tr}
	first := post(plain, map[string]string{"X-Session-Id": "agent-1"}, 100).Header.Get(extproc.EndpointHeader)
	for k := 101; k < 105; k++ {
		require.Equal(t, first, post(plain, map[string]string{"X-Session-Id": "agent-1"}, k).Header.Get(extproc.EndpointHeader))
	}

	mresp, err := plain.Get(m[3])
	require.NoError(t, err)
	b, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	require.Contains(t, string(b), "kvroute_session_cookies_set_total 1")
	require.Contains(t, string(b), `kvroute_session_keys_total{source="cookie"} 7`)
	require.Contains(t, string(b), `kvroute_session_keys_total{source="header"} 5`)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after cancellation")
	}
}
