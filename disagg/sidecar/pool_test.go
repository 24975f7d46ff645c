package sidecar

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/httpbarrier"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

// newBarrierEngine is an engine on loopback that holds every request until
// n of them are in flight at once (httpbarrier), so that each round of n
// concurrent requests needs n connections to it at the same moment, and
// answers answer; the test's cleanup closes it.
func newBarrierEngine(t *testing.T, n int, answer string) *httpbarrier.Server {
	b := httpbarrier.New(n, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answer)
	})
	t.Cleanup(b.Close)
	return b
}

// At n concurrent split requests, every connection to the decoder and to
// the prefiller goes back to the idle pool: the sidecar opens n of each in
// the first round and none after, as kvroute's gateway keeps its own. Before,
// the sidecar's transport kept net/http's default of two idle connections
// per host: it closed the others after every round and redialed them in
// the next, leaving sockets in TIME_WAIT and a dial on the requests' path.
func TestSidecarKeepsOneConnectionPerConcurrentRequest(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after every other cleanup
	const n, rounds = 32, 3
	pre := newBarrierEngine(t, n, `{"choices":[{"text":"x"}],"kv_transfer_params":{"do_remote_prefill":true,"remote_engine_id":"e"}}`)
	dec := newBarrierEngine(t, n, `{"choices":[{"text":" ok"}]}`)
	h, err := NewHandler(Config{DecoderURL: dec.URL}, Options{})
	require.NoError(t, err)
	t.Cleanup(h.Close) // before the engines close: their idle connections end first
	target := strings.TrimPrefix(pre.URL, "http://")

	for range rounds {
		var wg sync.WaitGroup
		codes := make(chan int, n)
		for range n {
			wg.Go(func() {
				req := httptest.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader(`{"model":"m","prompt":"hi","max_tokens":8}`))
				req.Header.Set(PrefillerHeader, target)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				codes <- rec.Code
			})
		}
		wg.Wait()
		close(codes)
		for c := range codes {
			require.Equal(t, http.StatusOK, c)
		}
	}
	require.Equal(t, float64(n*rounds), testutil.ToFloat64(h.x.m.requests.WithLabelValues(OutcomeSplit)), "every request was split")
	require.Equal(t, int64(n), dec.Accepted(), "decoder connections over %d rounds of %d concurrent requests", rounds, n)
	require.Equal(t, int64(n), pre.Accepted(), "prefiller connections over %d rounds of %d concurrent requests", rounds, n)
}
