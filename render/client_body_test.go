package render

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A renderer that announces a 60 MiB body and trickles it: twenty such
// calls at once hold only what has arrived, not twenty times the announced
// Content-Length.
func TestTricklingLargeResponsesStayBounded(t *testing.T) {
	defer leakcheck.Check(t)()
	const announced = 60 << 20
	var started sync.WaitGroup
	started.Add(20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(announced))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`[{"prompt_token_ids":[1`))
		w.(http.Flusher).Flush()
		started.Done()
		tick := time.NewTicker(10 * time.Millisecond) // the trickle's pace
		defer tick.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
				if _, err := w.Write([]byte(",1")); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		}
	}))
	defer srv.Close()
	c := newTestClient(t, func(cfg *Config) {
		cfg.URL = srv.URL
		cfg.Timeout = 2 * time.Second // each call ends at its deadline
		cfg.MaxConcurrency = new(0)   // all 20 reach the renderer at once
	})
	defer c.Close()

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak atomic.Uint64
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = c.Render(context.Background(), completions("hi"))
		}()
	}
	started.Wait()
	wg.Wait()
	close(stop)
	<-sampled
	for _, err := range errs {
		require.Error(t, err, "a body that never completes fails at the deadline")
	}
	grown := int64(peak.Load()) - int64(before.HeapInuse)
	t.Logf("heap growth with 20 trickling %d MiB responses: %.1f MiB", announced>>20, float64(grown)/(1<<20))
	require.Less(t, grown, int64(64<<20), "20 × 60 MiB announced must not be allocated up front")
}
