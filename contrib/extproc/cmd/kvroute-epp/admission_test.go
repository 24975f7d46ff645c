package main

import (
	"context"
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

func TestAdmissionFlagsAreCheckedBeforeStarting(t *testing.T) {
	defer leakcheck.Check(t)()
	dir := t.TempDir()
	args := []string{"--endpoints", "127.0.0.1:8000", "--model", model,
		"--listen-host", "127.0.0.1", "--grpc-port", "0", "--grpc-health-port", "0", "--metrics-port", "0"}
	// Without an admission stage (--admission-config, or the --config
	// file's), engine metrics feed nothing.
	err := run(context.Background(), append(args, "--engine-metrics-config", "em.yaml"), io.Discard, io.Discard)
	require.ErrorContains(t, err, "set --admission-config or --lora-config too")

	bad := filepath.Join(dir, "admission.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("queueTimout: 2s\n"), 0o600))
	err = run(context.Background(), append(args, "--admission-config", bad), io.Discard, io.Discard)
	require.ErrorContains(t, err, "queueTimout")

	good := filepath.Join(dir, "good.yaml")
	require.NoError(t, os.WriteFile(good, []byte("queueTimeout: 2s\n"), 0o600))
	badEM := filepath.Join(dir, "em.yaml")
	require.NoError(t, os.WriteFile(badEM, []byte("intervl: 1s\n"), 0o600))
	err = run(context.Background(), append(args, "--admission-config", good, "--engine-metrics-config", badEM), io.Discard, io.Discard)
	require.ErrorContains(t, err, "intervl")
}

// The binary with --admission-config and --engine-metrics-config: requests
// go through the admission stage (a malformed queue timeout is answered 400
// by the picker, a well-formed request is admitted and routed) and the
// engine's /metrics is scraped.
func TestRunWithAdmission(t *testing.T) {
	defer leakcheck.Check(t)()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	eng, err := server.New(server.Config{Model: model,
		Engine: simengine.Config{BlockSize: 16, NumGPUBlocks: 256, PrefillTokensPerSecond: 1e6, DecodeStep: time.Millisecond}}, server.Options{})
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- eng.Serve(ln) }()
	defer func() { _ = eng.Close(); <-served }()

	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte("model: "+model+"\nblockSize: 16\ndisableRender: true\nevents:\n  enabled: false\n"), 0o600))
	admPath := filepath.Join(dir, "admission.yaml")
	require.NoError(t, os.WriteFile(admPath, []byte("objectives:\n- {name: batch, priority: -1}\nqueueTimeout: 5s\n"), 0o600))
	emPath := filepath.Join(dir, "engine-metrics.yaml")
	require.NoError(t, os.WriteFile(emPath, []byte("interval: 50ms\n"), 0o600))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, done := startEPP(t, ctx, "--endpoints", ln.Addr().String(), "--config", cfgPath,
		"--admission-config", admPath, "--engine-metrics-config", emPath)

	conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	upstream := &http.Client{Transport: &http.Transport{}}
	defer upstream.CloseIdleConnections()
	envoy := httptest.NewServer(envoysim.New(envoysim.Config{}, extprocv3.NewExternalProcessorClient(conn), upstream))
	defer envoy.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	post := func(h map[string]string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, envoy.URL+"/v1/completions",
			strings.NewReader(`{"model":"`+model+`","prompt":"hello from envoy","max_tokens":2}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(body)
	}
	code, body := post(map[string]string{extproc.HeaderQueueTimeout: "later"})
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, http.CanonicalHeaderKey(extproc.HeaderQueueTimeout)) // named as package admission names it
	code, body = post(map[string]string{extproc.HeaderObjective: "batch", extproc.HeaderFairnessID: "tenant-a"})
	require.Equal(t, http.StatusOK, code, body)

	metrics := func() string {
		mresp, err := client.Get(m[3])
		require.NoError(t, err)
		b, _ := io.ReadAll(mresp.Body)
		mresp.Body.Close()
		return string(b)
	}
	require.Contains(t, metrics(), `kvroute_admission_requests_total{outcome="admitted",priority="-1"} 1`)
	require.Eventually(t, func() bool { return strings.Contains(metrics(), "kvroute_engine_metrics_scrapes_total") },
		20*time.Second, 10*time.Millisecond)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after cancellation")
	}
}
