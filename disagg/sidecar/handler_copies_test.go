package sidecar

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// The copies a split makes of a client body are charged to
// Config.MaxBodyBytesInFlight as the body is: while the prefiller works,
// the budget holds the body, its parsed members and the prefill body the
// prefiller got; while the decoder answers, the decode body the decoder
// got, and no more than one body's worth of it (the client body it
// replaced is given back). Before, the copies were charged nothing, and
// the decode body, as long as the response lasted, held beside the
// budget's bytes about as many again.
func TestSidecarChargesASplitsCopiesToTheBudget(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after every other cleanup
	preGot, preRelease := make(chan []byte, 1), make(chan struct{})
	prefiller := fakePrefiller(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		preGot <- b
		<-preRelease
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kv_transfer_params":{"do_remote_prefill":true,"remote_host":"p","remote_block_ids":[1,2,3]}}`)
	})
	decGot, decRelease := make(chan []byte, 1), make(chan struct{})
	decoder := fakePrefiller(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		decGot <- b
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {}\n\n")
		http.NewResponseController(w).Flush()
		select { // the stream goes on until the test has looked
		case <-decRelease:
		case <-r.Context().Done():
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	})
	releasePre := sync.OnceFunc(func() { close(preRelease) })
	releaseDec := sync.OnceFunc(func() { close(decRelease) })
	h, _, url := startSidecar(t, Config{DecoderURL: "http://" + decoder})
	t.Cleanup(func() { releasePre(); releaseDec() }) // first of the cleanups: the servers' Close waits for the handlers

	raw, err := json.Marshal(chat(strings.Repeat("x", 90<<10), 5, true))
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(raw))
	require.NoError(t, err)
	req.Header.Set(PrefillerHeader, prefiller)
	type answer struct {
		resp *http.Response
		err  error
	}
	answered := make(chan answer, 1)
	go func() { // no require off the test's goroutine
		resp, err := client.Do(req)
		answered <- answer{resp, err}
	}()

	pbody := <-preGot // the prefill step is under way, its body sent
	require.GreaterOrEqual(t, h.budget.InUse(), int64(2*len(raw)+len(pbody)),
		"the body, its parsed members and the prefill body are charged")
	releasePre()
	a := <-answered // the decoder's response has started
	require.NoError(t, a.err)
	defer a.resp.Body.Close()
	require.Equal(t, http.StatusOK, a.resp.StatusCode)
	dbody := <-decGot
	require.Contains(t, string(dbody), `"remote_block_ids":[1,2,3]`)
	inUse := h.budget.InUse()
	require.GreaterOrEqual(t, inUse, int64(len(dbody)), "the decode body is charged while the decoder answers")
	require.Less(t, inUse, int64(len(raw)+len(dbody)), "the client body it replaced is given back")

	releaseDec()
	b, err := io.ReadAll(a.resp.Body)
	require.NoError(t, err)
	require.Equal(t, "data: {}\n\ndata: [DONE]\n\n", string(b))
}

// A split whose copies find no room beside its body in
// Config.MaxBodyBytesInFlight, though it is the only request, goes to the
// decoder as it came, for a local prefill counted as body_budget, before
// the prefiller is sent anything: whether the parsed members already find
// no room (a body over half the budget) or only the prefill body (over a
// third), and nothing is left held. Before, it was answered 503 and never
// served, however idle the sidecar.
func TestSidecarPrefillsLocallyASplitWithoutRoomForItsCopies(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after every other cleanup
	prefiller := fakePrefiller(t, func(w http.ResponseWriter, r *http.Request) {
		t.Error("the prefiller was called")
	})
	decGot := make(chan []byte, 1)
	decoder := fakePrefiller(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		decGot <- b
	})
	h, reg, url := startSidecar(t, Config{DecoderURL: "http://" + decoder, MaxBodyBytes: 100 << 10, MaxBodyBytesInFlight: 100 << 10})
	released := func() bool { return h.budget.InUse() == 0 }
	for i, size := range []int{60 << 10, 40 << 10} {
		raw, err := json.Marshal(chat(strings.Repeat("x", size), 1, false))
		require.NoError(t, err)
		code, _, b := send(t, url+"/v1/chat/completions", prefiller, raw)
		require.Equal(t, http.StatusOK, code, string(b))
		require.Equal(t, string(raw), string(<-decGot), "the body as it came")
		require.Equal(t, float64(i+1), counter(t, reg, "kvroute_sidecar_prefill_fallbacks_total", "reason", ReasonBodyBudget))
		require.Equal(t, float64(i+1), counter(t, reg, "kvroute_sidecar_requests_total", "outcome", OutcomeFallback))
		// The handler gives its charge back as it returns, which may come
		// after the client has read the whole answer: wait for that.
		require.Eventually(t, released, 20*time.Second, time.Millisecond, "the split holds nothing after")
	}
	require.Zero(t, counter(t, reg, "kvroute_sidecar_refused_requests_total", "reason", refusedBodyBudget))
}

// A split without room for its copies whose body carries
// kv_transfer_params of its own cannot go to the decoder as it came (the
// decoder would pull blocks from wherever the client names), and the copy
// without them finds no room either: it is answered 503 and counted as
// body_budget, nothing sent on and nothing left held.
func TestSidecarRefusesASplitWithoutRoomForItsLocalBody(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after every other cleanup
	prefiller := fakePrefiller(t, func(w http.ResponseWriter, r *http.Request) {
		t.Error("the prefiller was called")
	})
	decoder := fakePrefiller(t, func(w http.ResponseWriter, r *http.Request) {
		t.Error("the decoder was called")
	})
	h, reg, url := startSidecar(t, Config{DecoderURL: "http://" + decoder, MaxBodyBytes: 100 << 10, MaxBodyBytesInFlight: 100 << 10})
	body := chat(strings.Repeat("x", 60<<10), 1, false)
	body["kv_transfer_params"] = map[string]any{"do_remote_prefill": true, "remote_host": "10.0.0.9"}
	code, hdr, b := send(t, url+"/v1/chat/completions", prefiller, body)
	require.Equal(t, http.StatusServiceUnavailable, code, string(b))
	require.Equal(t, "1", hdr.Get("Retry-After"))
	require.Equal(t, 1.0, counter(t, reg, "kvroute_sidecar_refused_requests_total", "reason", refusedBodyBudget))
	require.Zero(t, counter(t, reg, "kvroute_sidecar_prefill_fallbacks_total", "reason", ReasonBodyBudget))
	released := func() bool { return h.budget.InUse() == 0 }
	require.Eventually(t, released, 20*time.Second, time.Millisecond, "the refused split holds nothing")
}

// A split naming a prefiller the prefill step cannot use (a malformed
// x-prefiller-host-port, or one AllowTarget refuses) falls back by that
// reason whatever the budget: with room for its copies, without room for
// the parsed members (a body over half the budget) or without room for
// the prefill body (over a third). Before, the one without room for the
// members was counted as body_budget, hiding the bad target.
func TestSidecarCountsAnUnusableTargetWhateverTheBudget(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after every other cleanup
	decGot := make(chan []byte, 1)
	decoder := fakePrefiller(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		decGot <- b
	})
	const refused = "203.0.113.9:8000"
	reg := prometheus.NewRegistry()
	h, err := NewHandler(Config{DecoderURL: "http://" + decoder, MaxBodyBytes: 100 << 10, MaxBodyBytesInFlight: 100 << 10},
		Options{Set: telemetry.Set{Registerer: reg}, AllowTarget: func(hostPort string) bool { return hostPort != refused }})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close() })
	url := srv.URL
	released := func() bool { return h.budget.InUse() == 0 }
	want := map[string]float64{}
	for _, tc := range []struct{ target, reason string }{
		{"no-port", ReasonBadTarget},
		{"10.0.0.7:99999", ReasonBadTarget},
		{refused, ReasonNotAllowed},
	} {
		for _, size := range []int{1 << 10, 40 << 10, 60 << 10} {
			raw, err := json.Marshal(chat(strings.Repeat("x", size), 1, false))
			require.NoError(t, err)
			code, _, b := send(t, url+"/v1/chat/completions", tc.target, raw)
			require.Equal(t, http.StatusOK, code, string(b))
			require.Equal(t, string(raw), string(<-decGot), "the body as it came")
			want[tc.reason]++
			require.Equal(t, want[tc.reason], counter(t, reg, "kvroute_sidecar_prefill_fallbacks_total", "reason", tc.reason), "%s, %d bytes", tc.target, size)
			require.Zero(t, counter(t, reg, "kvroute_sidecar_prefill_fallbacks_total", "reason", ReasonBodyBudget), "%s, %d bytes", tc.target, size)
			require.Eventually(t, released, 20*time.Second, time.Millisecond, "the split holds nothing after")
		}
	}
	require.Zero(t, counter(t, reg, "kvroute_sidecar_refused_requests_total", "reason", refusedBodyBudget))
}
