package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// With RenderWorkers the render routes answer as before, only later.
func TestSaturatingRenderAnswersTheSame(t *testing.T) {
	plain, plainURL := startServer(t, Config{EnableScaleOut: true})
	_, satURL := startServer(t, Config{EnableScaleOut: true, RenderWorkers: 1, RenderTokenCost: time.Microsecond})
	body := map[string]any{"model": plain.Model(), "prompt": "The quick brown fox jumps over the lazy dog"}
	code, want := post(t, plainURL+"/v1/completions/render", body)
	require.Equal(t, http.StatusOK, code)
	code, got := post(t, satURL+"/v1/completions/render", body)
	require.Equal(t, http.StatusOK, code)
	var w, g []generateRequest
	require.NoError(t, json.Unmarshal(want, &w))
	require.NoError(t, json.Unmarshal(got, &g))
	require.Len(t, g, 1)
	require.Equal(t, w[0].TokenIDs, g[0].TokenIDs)

	chat := map[string]any{"model": plain.Model(), "messages": []any{map[string]any{"role": "user", "content": "hi"}}}
	code, _ = post(t, satURL+"/v1/chat/completions/render", chat)
	require.Equal(t, http.StatusOK, code)
}

// No more than RenderWorkers renders are worked on at once; the others
// queue, and Close cuts both short without leaving a goroutine.
func TestSaturatingRenderQueuesBeyondItsWorkers(t *testing.T) {
	defer leakcheck.Check(t)()
	s, err := New(Config{Model: "m", EnableScaleOut: true, Engine: fastEngine(),
		RenderWorkers: 2, RenderTokenCost: time.Hour}, Options{})
	require.NoError(t, err)
	require.NoError(t, s.Start("127.0.0.1:0"))
	url := "http://" + s.Addr() + "/v1/completions/render"

	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	codes := make(chan int, 3)
	for range 3 {
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(`{"model":"m","prompt":"hello there"}`)))
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(s.render.busy) == 2 && testutil.ToFloat64(s.render.queued) == 1
	}, 10*time.Second, time.Millisecond, "two renders worked on, one waiting")

	require.NoError(t, s.Close())
	for range 3 {
		code := <-codes
		require.Contains(t, []int{0, http.StatusServiceUnavailable}, code)
	}
	require.Zero(t, testutil.ToFloat64(s.render.busy))
	require.Zero(t, testutil.ToFloat64(s.render.queued))
}

func TestSaturatingRenderRejectsNegativeKnobs(t *testing.T) {
	_, err := New(Config{Model: "m", RenderWorkers: -1}, Options{})
	require.ErrorContains(t, err, "renderWorkers")
	_, err = New(Config{Model: "m", RenderWorkers: 1, RenderTokenCost: -time.Second}, Options{})
	require.ErrorContains(t, err, "renderTokenCost")
}
