package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
)

// cannedTransport answers every request with the same small completion, in
// process: the allocations measured are the gateway's, not a socket's.
type cannedTransport struct{}

func (cannedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	const body = `{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":" ok"}]}`
	return &http.Response{StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)), Request: req}, nil
}

// countingPicker counts the distinct Decisions a Router hands out.
type countingPicker struct {
	r    *kvroute.Router
	seen map[*kvroute.Decision]bool
}

func (p *countingPicker) Pick(ctx context.Context, req *kvroute.Request, eps []kvroute.Endpoint) (*kvroute.Decision, error) {
	d, err := p.r.Pick(ctx, req, eps)
	if err == nil {
		p.seen[d] = true
	}
	return d, err
}

// A gateway request allocates no Decision: the Handler releases each one
// to the Router, whose next pick reuses it. Over sequential requests through
// the Handler (a Router picking by load, an in-process transport), the
// Router hands out one Decision again and again, and a request allocates at
// least one object less than with the release left out.
func TestGatewayRequestAllocatesNoDecision(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items at random: allocation counts vary")
	}
	rcfg := kvroute.DefaultConfig()
	rcfg.Model = testModel
	rcfg.Events.Enabled = new(false)
	rcfg.DisableRender = true
	r, err := kvroute.New(context.Background(), rcfg, kvroute.Options{})
	require.NoError(t, err)
	defer r.Close()
	eps := []kvroute.Endpoint{{ID: "10.0.0.1:8000"}, {ID: "10.0.0.2:8000"}}
	require.NoError(t, r.SetEndpoints(eps))
	p := &countingPicker{r: r, seen: map[*kvroute.Decision]bool{}}
	h, err := New(Config{Model: testModel}, p, Options{Transport: cannedTransport{}})
	require.NoError(t, err)
	defer h.Close()
	h.SetEndpoints(eps)
	body := completionsBody("hello there", false)
	serve := func() {
		req := httptest.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
	released := testing.AllocsPerRun(200, serve) // AllocsPerRun runs on one P: one pool
	require.LessOrEqual(t, len(p.seen), 2, "released Decisions are reused")

	h.release = func(*kvroute.Decision) {}
	clear(p.seen)
	kept := testing.AllocsPerRun(200, serve)
	require.Greater(t, len(p.seen), 100, "without the release every request gets a new Decision")
	t.Logf("allocations per gateway request: %.0f released, %.0f without the release", released, kept)
	require.LessOrEqual(t, released, kept-1, "the release saves the Decision's allocation")
}
