package extproc

import (
	"context"
	"errors"
	"io"
	"net"
	rtmetrics "runtime/metrics"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvroute/kvroute"
)

// noopProcessor is the floor of BenchmarkPickerOverNoop: an ext_proc server
// that answers every message of a request as the picker does, with
// responses of the same shape (the destination and content-length header
// mutations and the destination metadata, the body echoed as one streamed
// mutation, one response header, the response body echoed), without reading
// the headers or the body and without picking: what the gRPC exchange
// itself costs.
type noopProcessor struct {
	extprocv3.UnimplementedExternalProcessorServer
	endpoint string
}

// Process answers one stream.
func (n *noopProcessor) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	for {
		req, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) || stream.Context().Err() != nil {
				return nil
			}
			return err
		}
		var out []*extprocv3.ProcessingResponse
		switch v := req.Request.(type) {
		case *extprocv3.ProcessingRequest_RequestBody:
			if !v.RequestBody.GetEndOfStream() {
				continue
			}
			body := v.RequestBody.GetBody()
			out = append(out, &extprocv3.ProcessingResponse{
				Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{
					Response: &extprocv3.CommonResponse{
						ClearRouteCache: true,
						HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
							header(DefaultDestinationHeader, n.endpoint), header("content-length", "0")}},
					},
				}},
				DynamicMetadata: destinationMetadata(DefaultMetadataNamespace, DefaultDestinationHeader, n.endpoint),
			}, &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{
				RequestBody: &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{BodyMutation: streamedBody(body, true)}},
			}})
		case *extprocv3.ProcessingRequest_ResponseHeaders:
			out = append(out, &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
				ResponseHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{
					HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{header(EndpointHeader, n.endpoint)}},
				}},
			}})
		case *extprocv3.ProcessingRequest_ResponseBody:
			out = append(out, &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
				ResponseBody: &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{
					BodyMutation: streamedBody(v.ResponseBody.GetBody(), v.ResponseBody.GetEndOfStream()),
				}},
			}})
		}
		for _, r := range out {
			if err := stream.Send(r); err != nil {
				return err
			}
		}
	}
}

// timedPicker is the picker's kvroute.Picker with the time spent in Pick
// added up, so that the benchmark reports Pick beside the rest.
type timedPicker struct {
	kvroute.Picker
	ns atomic.Int64
}

// Pick calls the router's Pick and adds its duration.
func (t *timedPicker) Pick(ctx context.Context, req *kvroute.Request, eps []kvroute.Endpoint) (*kvroute.Decision, error) {
	start := time.Now()
	d, err := t.Picker.Pick(ctx, req, eps)
	t.ns.Add(int64(time.Since(start)))
	return d, err
}

// exchange is one client of an ext_proc server, sending the request
// sequence of BenchmarkPickerOverNoop.
type exchange struct {
	client extprocv3.ExternalProcessorClient
	conn   *grpc.ClientConn
	stop   func()
}

// serveExtProc serves srv on a loopback port and connects a client to it.
func serveExtProc(b *testing.B, register func(*grpc.Server)) *exchange {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	gs := grpc.NewServer()
	register(gs)
	go func() { _ = gs.Serve(ln) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(b, err)
	return &exchange{client: extprocv3.NewExternalProcessorClient(conn), conn: conn, stop: func() { conn.Close(); gs.Stop() }}
}

// run sends one request's messages as Envoy does for a non-streamed
// completion in buffered mode: the request headers and the whole body
// (msgs[0:2]), then the response headers naming the endpoint the answer
// chose as served (served, per candidate) and the response body (msgs[2]).
func (e *exchange) run(msgs []*extprocv3.ProcessingRequest, served map[string]*extprocv3.ProcessingRequest) error {
	st, err := e.client.Process(context.Background())
	if err != nil {
		return err
	}
	for _, m := range msgs[:2] {
		if err := st.Send(m); err != nil {
			return err
		}
	}
	h, err := st.Recv()
	if err != nil {
		return err
	}
	got := setHeader(h.GetRequestHeaders().GetResponse().GetHeaderMutation(), DefaultDestinationHeader)
	if served[got] == nil {
		return errors.New("destination " + got + " is not a candidate")
	}
	if _, err := st.Recv(); err != nil { // the body's answer
		return err
	}
	if err := st.Send(served[got]); err != nil { // Envoy reports the pick as served
		return err
	}
	if _, err := st.Recv(); err != nil {
		return err
	}
	if err := st.Send(msgs[2]); err != nil {
		return err
	}
	if _, err := st.Recv(); err != nil {
		return err
	}
	return st.CloseSend()
}

// cpuNow is the process's user + system CPU time.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// allocsNow is the number of heap objects the process has allocated.
func allocsNow(s []rtmetrics.Sample) uint64 {
	rtmetrics.Read(s)
	return s[0].Value.Uint64()
}

// noopBatch is how many requests one timed slice of BenchmarkPickerOverNoop
// sends through one processor before switching to the other.
const noopBatch = 32

// BenchmarkPickerOverNoop drives the same ProcessingRequest sequence (request
// headers, a 200-word completions body in one chunk, response headers, a
// response body: four round trips over a real gRPC stream on loopback,
// client and server in this process) through kvroute's picker, with a real
// Router over 8 endpoints (render off: Pick chooses by load among them) and an
// x-request-id as Envoy sends, and through noopProcessor, in alternating
// batches of 32, so both see the same machine. It reports the process CPU
// time per request of each (cpu-µs/req, noop-cpu-µs/req; the client's share
// is in both), their median per-batch ratio x-noop (target ≤ 1.5), the
// same ratio with the time spent in Router.Pick taken out
// (x-noop-excl-pick) and that time (pick-µs/req, wall time), and the heap
// objects the picker allocates per request beyond the no-op's
// (runtime/metrics, process-wide): the median over batches as
// allocs-over-noop (target ≤ 50; a batch in which the GC emptied gRPC's
// pools counts their refill, hence the median) and the mean beside it.
func BenchmarkPickerOverNoop(b *testing.B) {
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
	timed := &timedPicker{Picker: router}
	picker, err := New(Config{Model: testModel}, timed, Options{})
	require.NoError(b, err)
	picker.SetEndpoints(eps)
	withPicker := serveExtProc(b, picker.Register)
	defer withPicker.stop()
	noop := serveExtProc(b, func(g *grpc.Server) {
		extprocv3.RegisterExternalProcessorServer(g, &noopProcessor{endpoint: eps[0].ID})
	})
	defer noop.stop()

	body := completionsBody(prompt(1, 200, "bench"), false)
	msgs := []*extprocv3.ProcessingRequest{
		envoyHeadersID("/v1/completions", false, nil, "bench-request"),
		bodyChunk(body, true),
		respBody(`{"choices":[{"text":"ok"}]}`, true),
	}
	served := map[string]*extprocv3.ProcessingRequest{}
	for _, ep := range eps {
		served[ep.ID] = respHeaders(ep.ID, false)
	}
	for range 64 { // warm both: connections, pools, the picker's first requests
		require.NoError(b, withPicker.run(msgs, served))
		require.NoError(b, noop.run(msgs, served))
	}

	sample := []rtmetrics.Sample{{Name: "/gc/heap/allocs:objects"}}
	var cpuPick, cpuNoop time.Duration
	var allocPick, allocNoop uint64
	var ratios, ratiosExcl, extra []float64
	timed.ns.Store(0)
	batch := func(e *exchange, n int) (time.Duration, uint64) {
		a0, c0 := allocsNow(sample), cpuNow()
		for range n {
			if err := e.run(msgs, served); err != nil {
				b.Fatal(err)
			}
		}
		c1, a1 := cpuNow(), allocsNow(sample)
		return c1 - c0, a1 - a0
	}
	b.ResetTimer()
	for done := 0; done < b.N; done += noopBatch {
		n := min(noopBatch, b.N-done)
		p0 := timed.ns.Load()
		cp, ap := batch(withPicker, n)
		pickNs := time.Duration(timed.ns.Load() - p0)
		cn, an := batch(noop, n)
		cpuPick, cpuNoop, allocPick, allocNoop = cpuPick+cp, cpuNoop+cn, allocPick+ap, allocNoop+an
		extra = append(extra, (float64(ap)-float64(an))/float64(n))
		if cn > 0 {
			ratios = append(ratios, float64(cp)/float64(cn))
			ratiosExcl = append(ratiosExcl, float64(cp-pickNs)/float64(cn))
		}
	}
	b.StopTimer()
	if len(ratios) == 0 {
		return // too short to read the CPU clock's ticks
	}
	slices.Sort(ratios)
	slices.Sort(ratiosExcl)
	slices.Sort(extra)
	perReq := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) / 1000 }
	b.ReportMetric(perReq(cpuPick), "cpu-µs/req")
	b.ReportMetric(perReq(cpuNoop), "noop-cpu-µs/req")
	b.ReportMetric(perReq(time.Duration(timed.ns.Load())), "pick-µs/req")
	b.ReportMetric(ratios[len(ratios)/2], "x-noop")
	b.ReportMetric(ratiosExcl[len(ratiosExcl)/2], "x-noop-excl-pick")
	b.ReportMetric(extra[len(extra)/2], "allocs-over-noop")
	b.ReportMetric((float64(allocPick)-float64(allocNoop))/float64(b.N), "mean-allocs-over-noop")
	b.ReportMetric(float64(allocNoop)/float64(b.N), "noop-allocs/req")
	for _, ep := range eps {
		if _, reqs, _ := router.Load().Load(ep.ID); reqs != 0 {
			b.Fatalf("load left behind on %s: %d requests", ep.ID, reqs)
		}
	}
}
