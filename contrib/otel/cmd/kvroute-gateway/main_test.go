package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/contrib/otel/otlpenv"
	"github.com/kvroute/kvroute/contrib/otel/otlptest"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/syncbuf"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

const model = "sim/model"

// startEngine serves a simulated vLLM engine with render routes.
func startEngine(t *testing.T) (id string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv, err := server.New(server.Config{Model: model, EnableScaleOut: true,
		Engine: simengine.Config{BlockSize: 16, NumGPUBlocks: 256, PrefillTokensPerSecond: 1e7, DecodeStep: time.Millisecond}}, server.Options{})
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	return ln.Addr().String(), func() {
		require.NoError(t, srv.Close())
		<-served
	}
}

// The client's trace, the gateway's server span and the router's pick and
// render spans cross the wire to a real OTLP receiver, for each protocol.
// The batch processor's delay is an hour, so the spans arriving at all
// proves that shutdown flushes them.
func TestGatewayExportsOTLP(t *testing.T) {
	for _, proto := range []string{otlpenv.ProtocolGRPC, otlpenv.ProtocolHTTPProtobuf} {
		t.Run(strings.ReplaceAll(proto, "/", "_"), func(t *testing.T) {
			defer leakcheck.Check(t)()
			var recv *otlptest.Receiver
			if proto == otlpenv.ProtocolGRPC {
				var err error
				recv, err = otlptest.NewGRPC()
				require.NoError(t, err)
			} else {
				recv = otlptest.NewHTTP()
			}
			defer recv.Close()
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.Endpoint)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", proto)
			t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
			t.Setenv("OTEL_SERVICE_NAME", "gw-under-test")
			t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000")
			t.Setenv("OTEL_TRACES_SAMPLER", "parentbased_always_on")

			id, stopEngine := startEngine(t)
			defer stopEngine()
			cfg := filepath.Join(t.TempDir(), "router.yaml")
			require.NoError(t, os.WriteFile(cfg, []byte("events: {enabled: false}\n"), 0o600))

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var stdout syncbuf.Buffer
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--endpoints", id, "--model", model, "--config", cfg}, &stdout, io.Discard)
			}()
			re := regexp.MustCompile(`serving on (http://[0-9.:]+)`)
			var url string
			require.Eventually(t, func() bool {
				m := re.FindStringSubmatch(stdout.String())
				if m != nil {
					url = m[1]
				}
				return m != nil
			}, 10*time.Second, 5*time.Millisecond)
			require.Contains(t, stdout.String(), "exporting traces over OTLP ("+proto+") to "+recv.Endpoint)

			const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
			req, err := http.NewRequest(http.MethodPost, url+"/v1/completions",
				strings.NewReader(`{"model":"`+model+`","prompt":"a prompt long enough to fill a block or two of tokens in the simulated engine","max_tokens":2}`))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
			client := &http.Client{Transport: &http.Transport{}}
			resp, err := client.Do(req)
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			client.CloseIdleConnections()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Empty(t, recv.Spans(), "nothing is exported before the batch delay or shutdown")

			cancel()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(30 * time.Second):
				t.Fatal("run did not return after cancellation")
			}

			byName := map[string]otlptest.Span{}
			for _, s := range recv.Spans() {
				byName[s.Name] = s
				require.Equal(t, traceID, s.TraceID, "span %s is in the client's trace", s.Name)
				require.Equal(t, "gw-under-test", s.Service)
			}
			for _, name := range []string{"gateway /v1/completions", "pick", "keys", "index_lookup", "render"} {
				require.Contains(t, byName, name)
			}
			require.Equal(t, "00f067aa0ba902b7", byName["gateway /v1/completions"].ParentSpanID, "the server span joins the client's")
			require.Equal(t, byName["gateway /v1/completions"].SpanID, byName["pick"].ParentSpanID)
			require.Equal(t, byName["pick"].SpanID, byName["render"].ParentSpanID)
			_, rejected := recv.Requests()
			require.Zero(t, rejected)
		})
	}
}

// Without an endpoint the binary runs the plain gateway and exports nothing;
// a bad protocol is an error before anything listens.
func TestGatewayWithoutOTLPAndWithABadProtocol(t *testing.T) {
	defer leakcheck.Check(t)()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	ctx, cancel := context.WithCancel(context.Background())
	var stdout syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--endpoints", "127.0.0.1:9", "--policy", "round-robin"}, &stdout, io.Discard)
	}()
	require.Eventually(t, func() bool { return strings.Contains(stdout.String(), "serving on") }, 10*time.Second, 5*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	require.NotContains(t, stdout.String(), "OTLP")

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	err := run(context.Background(), []string{"--listen", "127.0.0.1:0", "--endpoints", "127.0.0.1:9", "--policy", "round-robin"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, `"http/json" is not supported`)
}
