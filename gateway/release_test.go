package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
)

// releaseLedger is a Picker around a Router that records every Decision it
// hands out, and the Handler's release hook that checks each is released
// exactly once: a Decision released while not handed out (a second
// release, or one the picker never returned) is an error, and so is a
// Decision handed out again while still live (the pool gave one Decision to
// two requests). The hook records before it calls Release, so the Decision
// cannot come back from the pool before its entry is gone.
type releaseLedger struct {
	r *kvroute.Router

	mu       sync.Mutex
	live     map[*kvroute.Decision]bool
	picks    int
	releases int
	errs     []string
	seen     map[*kvroute.Decision]bool // every Decision ever handed out
	released chan struct{}              // one value per release
}

func newReleaseLedger(r *kvroute.Router) *releaseLedger {
	return &releaseLedger{r: r, live: map[*kvroute.Decision]bool{}, seen: map[*kvroute.Decision]bool{}, released: make(chan struct{}, 4096)}
}

func (l *releaseLedger) Pick(ctx context.Context, req *kvroute.Request, eps []kvroute.Endpoint) (*kvroute.Decision, error) {
	d, err := l.r.Pick(ctx, req, eps)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	if l.live[d] {
		l.errs = append(l.errs, fmt.Sprintf("decision %p handed out while still live", d))
	}
	l.live[d], l.seen[d] = true, true
	l.picks++
	l.mu.Unlock()
	return d, nil
}

func (l *releaseLedger) release(d *kvroute.Decision) {
	l.mu.Lock()
	if !l.live[d] {
		l.errs = append(l.errs, fmt.Sprintf("decision %p released twice or never handed out", d))
	}
	delete(l.live, d)
	l.releases++
	l.mu.Unlock()
	d.Release()
	l.released <- struct{}{}
}

// settle waits until every Decision handed out has been released (the
// handlers release theirs after the client has its response) and checks
// that none was released twice.
func (l *releaseLedger) settle(t *testing.T) (picks int) {
	t.Helper()
	for {
		l.mu.Lock()
		picks, releases, errs := l.picks, l.releases, append([]string(nil), l.errs...)
		l.mu.Unlock()
		require.Empty(t, errs)
		require.LessOrEqual(t, releases, picks)
		if releases == picks {
			return picks
		}
		recv(t, l.released, "a Decision's release")
	}
}

// ledgerHarness is a gateway in front of fake engines with roles (one per
// engine; "" serves whole requests), routed by a Router with opts through a
// releaseLedger.
type ledgerHarness struct {
	*harness
	ledger *releaseLedger
}

func newLedgerHarness(t *testing.T, roles []string, cfg Config, opts kvroute.Options) *ledgerHarness {
	t.Helper()
	h := &harness{t: t, reg: prometheus.NewRegistry(), client: &http.Client{Transport: &http.Transport{}}}
	for _, role := range roles {
		u := newUpstream(t)
		h.ups = append(h.ups, u)
		h.eps = append(h.eps, kvroute.Endpoint{ID: u.id, Role: role})
	}
	rcfg := kvroute.DefaultConfig()
	rcfg.Model = testModel
	rcfg.Events.Enabled = new(false)
	opts.Set = telemetry.Set{Registerer: h.reg}
	var err error
	h.router, err = kvroute.New(context.Background(), rcfg, opts)
	require.NoError(t, err)
	require.NoError(t, h.router.SetEndpoints(h.eps))
	cfg.Model = testModel
	l := newReleaseLedger(h.router)
	h.handler, err = New(cfg, l, Options{Set: telemetry.Set{Registerer: h.reg}})
	require.NoError(t, err)
	h.handler.release = l.release
	h.handler.SetEndpoints(h.eps)
	h.gw = httptest.NewServer(h.handler)
	return &ledgerHarness{harness: h, ledger: l}
}

// releaseEngine answers by the request's X-Test-Mode header: ok (JSON with usage),
// stream (two SSE events), status (a 500), break (dies mid-body), hang
// (one chunk, then waits for the gateway to go away).
func releaseEngine(w http.ResponseWriter, r *http.Request) {
	mode := r.Header.Get("X-Test-Mode")
	switch mode {
	case "stream":
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"text\":\"a\"}]}\n\n")
		w.(http.Flusher).Flush()
		io.WriteString(w, "data: {\"choices\":[{\"text\":\"b\"}],\"usage\":{\"prompt_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":0}}}\n\ndata: [DONE]\n\n")
	case "status":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"error":{"message":"boom","type":"InternalServerError","param":null,"code":500}}`)
	case "break":
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, "0123456789")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	case "hang":
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"text\":\"a\"}]}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	default:
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":" ok"}],"usage":{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":0}}}`)
	}
}

// send posts one request of mode (and request ID id, if any) and reads its
// response as a client of that mode would: a hang is cancelled after its
// first chunk.
func (h *ledgerHarness) send(t *testing.T, mode, id string, i int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b, _ := json.Marshal(map[string]any{"model": testModel, "prompt": fmt.Sprintf("%s prompt number %d with some words to key", mode, i), "max_tokens": 4})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.gw.URL+"/v1/completions", strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Test-Mode", mode)
	if id != "" {
		req.Header.Set(headerRequestID, id)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		t.Errorf("%s: %v", mode, err)
		return
	}
	defer resp.Body.Close()
	if mode == "hang" {
		buf := make([]byte, 1)
		if _, err := resp.Body.Read(buf); err != nil {
			t.Errorf("hang: first chunk: %v", err)
		}
		cancel() // the client goes away mid-stream
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body) // break: an error, by design
}

// Every Decision a gateway request gets is released exactly once, on every
// path: a complete answer (with the engine's usage observed, so that Done
// comes from the response path first), a stream, an engine error status, an
// engine that dies mid-body, a client that goes away mid-stream, a request
// filed under a client's X-Request-Id, and, last, an engine that is gone.
// Other requests' load stays on every endpoint throughout, so that a second
// release would take from it.
func TestGatewayReleasesEachDecisionOnceOnEveryPath(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newLedgerHarness(t, []string{"", ""}, Config{ObserveCachedTokens: true}, kvroute.Options{})
	defer h.close()
	for _, u := range h.ups {
		u.setInfer(releaseEngine)
	}
	hold := holdLoad(t, h.harness)
	modes := []string{"ok", "stream", "status", "break", "hang"}
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() {
			for i := range 10 {
				mode := modes[(c+i)%len(modes)]
				id := ""
				if i%3 == 0 {
					id = fmt.Sprintf("req-%d-%d", c, i)
				}
				h.send(t, mode, id, c*100+i)
			}
		})
	}
	wg.Wait()
	require.Equal(t, 40, h.ledger.settle(t))
	hold.check(t)
	require.Zero(t, h.router.Requests().Len(), "no request stays filed")

	for _, u := range h.ups {
		u.Close() // the engines are gone: 502, still one release
	}
	resp := h.post("/v1/completions", completionsBody("unreachable", false))
	readAll(t, resp)
	require.Equal(t, http.StatusBadGateway, resp.StatusCode)
	require.Equal(t, 41, h.ledger.settle(t))
	hold.check(t)
	hold.done()
}

// A split request (a decode Decision carrying its prefill pick in Roles) is
// released once, which ends both picks, on its success and error paths.
func TestGatewayReleasesASplitDecisionOnce(t *testing.T) {
	defer leakcheck.Check(t)()
	p, err := disagg.New(disagg.Config{NonCachedTokens: -1}, disagg.Options{})
	require.NoError(t, err)
	h := newLedgerHarness(t, []string{disagg.RolePrefill, disagg.RolePrefill, disagg.RoleDecode, disagg.RoleDecode}, Config{}, kvroute.Options{Profile: p})
	defer h.close()
	for _, u := range h.ups {
		u.setInfer(releaseEngine)
	}
	hold := holdLoad(t, h.harness)
	var wg sync.WaitGroup
	for c := range 3 {
		wg.Go(func() {
			for i, mode := range []string{"ok", "stream", "status", "break", "hang"} {
				h.send(t, mode, "", c*100+i)
			}
		})
	}
	wg.Wait()
	require.Equal(t, 15, h.ledger.settle(t))
	hold.check(t)
	bodies, headers := h.ups[2].received()
	bodies2, headers2 := h.ups[3].received()
	require.Len(t, append(bodies, bodies2...), 15, "every request went to a decode engine")
	for _, hd := range append(headers, headers2...) {
		require.NotEmpty(t, hd.Get(disagg.HeaderPrefiller), "every request was split")
	}
	hold.done()
}

// heldLoad is one other request's load on every endpoint of a harness.
type heldLoad struct {
	h       *harness
	handles []*tokenload.Inflight
}

func holdLoad(t *testing.T, h *harness) *heldLoad {
	t.Helper()
	hl := &heldLoad{h: h}
	for _, e := range h.eps {
		hl.handles = append(hl.handles, h.router.Load().Dispatch(e.ID, 1_000_000))
	}
	hl.check(t)
	return hl
}

// check requires that every endpoint holds exactly the held load.
func (hl *heldLoad) check(t *testing.T) {
	t.Helper()
	for _, e := range hl.h.eps {
		tok, n := hl.h.load(e.ID)
		require.Equal(t, [2]int64{1_000_000, 1}, [2]int64{tok, n}, e.ID)
	}
}

func (hl *heldLoad) done() {
	for _, d := range hl.handles {
		d.Done()
	}
}
