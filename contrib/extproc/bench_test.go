package extproc

import (
	"context"
	"net"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvroute/kvroute"
)

// BenchmarkProcessRoundTrip measures what the picker adds to one request over
// loopback gRPC, render excluded: the whole ext_proc exchange Envoy has with
// it for a non-streamed completion (request headers, one body chunk, response
// headers, one response body chunk; four round trips) through a real Router
// with rendering disabled (load-only choice among 8 endpoints).
func BenchmarkProcessRoundTrip(b *testing.B) {
	cfg := kvroute.DefaultConfig()
	cfg.Model = testModel
	cfg.Events.Enabled = new(false)
	cfg.DisableRender = true
	router, err := kvroute.New(context.Background(), cfg, kvroute.Options{})
	require.NoError(b, err)
	defer router.Close()
	eps := make([]kvroute.Endpoint, 8)
	for i := range eps {
		eps[i] = kvroute.Endpoint{ID: net.JoinHostPort("10.0.0.1", string(rune('0'+i))+"000")}
	}
	require.NoError(b, router.SetEndpoints(eps))
	picker, err := New(Config{Model: testModel}, router, Options{})
	require.NoError(b, err)
	picker.SetEndpoints(eps)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	gs := grpc.NewServer()
	picker.Register(gs)
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(b, err)
	defer conn.Close()
	client := extprocv3.NewExternalProcessorClient(conn)
	body := completionsBody(prompt(1, 200, "bench"), false)

	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		st, err := client.Process(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		mustSend := func(r *extprocv3.ProcessingRequest) {
			if err := st.Send(r); err != nil {
				b.Fatal(err)
			}
		}
		mustRecv := func() *extprocv3.ProcessingResponse {
			r, err := st.Recv()
			if err != nil {
				b.Fatal(err)
			}
			return r
		}
		mustSend(envoyHeaders("/v1/completions", false, nil))
		mustSend(bodyChunk(body, true))
		if mustRecv().GetRequestHeaders() == nil {
			b.Fatal("no request-headers answer")
		}
		mustRecv()
		mustSend(respHeaders("10.0.0.1:0000", false))
		mustRecv()
		mustSend(respBody(`{"choices":[]}`, true))
		mustRecv()
		_ = st.CloseSend()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/4/1000, "µs/round-trip")
	for _, ep := range eps {
		if _, reqs, _ := router.Load().Load(ep.ID); reqs != 0 {
			b.Fatalf("load left behind on %s: %d requests", ep.ID, reqs)
		}
	}
}
