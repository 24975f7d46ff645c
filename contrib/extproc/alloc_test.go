package extproc

import (
	"context"
	"io"
	"net"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/kvroute/kvroute"
)

// memStream is an ext_proc stream in memory: Recv hands out msgs in order,
// then io.EOF; Send keeps the last response.
type memStream struct {
	grpc.ServerStream
	msgs []*extprocv3.ProcessingRequest
	next int
	sent int
}

func (m *memStream) Context() context.Context { return context.Background() }

func (m *memStream) Recv() (*extprocv3.ProcessingRequest, error) {
	if m.next == len(m.msgs) {
		return nil, io.EOF
	}
	m.next++
	return m.msgs[m.next-1], nil
}

func (m *memStream) Send(*extprocv3.ProcessingResponse) error { m.sent++; return nil }

// TestPickerAllocationsPerRequest bounds what the picker allocates for one
// routed request beyond what the no-op processor of
// BenchmarkPickerOverNoop allocates answering the same messages (gRPC left
// out, both on an in-memory stream): its copy of the request headers, the
// body's parse, the pick and its bookkeeping. Target: at most 50.
func TestPickerAllocationsPerRequest(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items at random: allocation counts vary")
	}
	cfg := kvroute.DefaultConfig()
	cfg.Model = testModel
	cfg.Events.Enabled = new(false)
	cfg.DisableRender = true
	router, err := kvroute.New(context.Background(), cfg, kvroute.Options{})
	require.NoError(t, err)
	defer router.Close()
	eps := []kvroute.Endpoint{{ID: net.JoinHostPort("10.0.0.1", "8000")}}
	require.NoError(t, router.SetEndpoints(eps))
	picker, err := New(Config{Model: testModel}, router, Options{})
	require.NoError(t, err)
	picker.SetEndpoints(eps)
	msgs := []*extprocv3.ProcessingRequest{
		envoyHeadersID("/v1/completions", false, nil, "alloc-request"),
		bodyChunk(completionsBody(prompt(1, 200, "alloc"), false), true),
		respHeaders(eps[0].ID, false),
		respBody(`{"choices":[{"text":"ok"}]}`, true),
	}
	st := &memStream{msgs: msgs}
	runOn := func(p extprocv3.ExternalProcessorServer) func() {
		return func() {
			st.next, st.sent = 0, 0
			if err := p.Process(st); err != nil {
				t.Fatal(err)
			}
			if st.sent != 4 {
				t.Fatalf("%d responses, want 4", st.sent)
			}
		}
	}
	runPicker, runNoop := runOn(picker), runOn(&noopProcessor{endpoint: eps[0].ID})
	runPicker()
	runNoop()
	allocs, floor := testing.AllocsPerRun(200, runPicker), testing.AllocsPerRun(200, runNoop)
	t.Logf("%.0f allocations per request, the no-op processor %.0f", allocs, floor)
	require.LessOrEqual(t, allocs-floor, 50.0, "allocations over the no-op processor's")
	_, reqs, _ := router.Load().Load(eps[0].ID)
	require.Zero(t, reqs)
}
