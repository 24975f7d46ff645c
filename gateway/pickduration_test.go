package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/telemetry"
)

// slowUpload advances clk by d on its first read, as a client that takes d
// to upload its body does.
type slowUpload struct {
	r   io.Reader
	clk *telemetry.Manual
	d   time.Duration
	adv bool
}

func (b *slowUpload) Read(p []byte) (int, error) {
	if !b.adv {
		b.adv = true
		b.clk.Advance(b.d)
	}
	return b.r.Read(p)
}

// slowPicker picks round-robin after advancing clk by d, as a pick whose
// render call takes d does.
type slowPicker struct {
	RoundRobin
	clk *telemetry.Manual
	d   time.Duration
}

func (p *slowPicker) Pick(ctx context.Context, req *kvroute.Request, eps []kvroute.Endpoint) (*kvroute.Decision, error) {
	p.clk.Advance(p.d)
	return p.RoundRobin.Pick(ctx, req, eps)
}

// kvroute_gateway_pick_duration_seconds is the time of the routing decision
// alone: a body that takes 10s to upload is the client's time, not the
// pick's, while the pick's own 2s are counted.
func TestPickDurationExcludesTheBodyUpload(t *testing.T) {
	u := newUpstream(t)
	defer u.Close()
	clk := telemetry.NewManual(time.Unix(1_800_000_000, 0))
	reg := prometheus.NewRegistry()
	h, err := New(Config{Model: testModel}, &slowPicker{clk: clk, d: 2 * time.Second},
		Options{Set: telemetry.Set{Registerer: reg, Clock: clk}})
	require.NoError(t, err)
	defer h.Close()
	h.SetEndpoints([]kvroute.Endpoint{{ID: u.id}})
	body := completionsBody("hello", false)
	r := httptest.NewRequest(http.MethodPost, "/v1/completions", &slowUpload{r: strings.NewReader(body), clk: clk, d: 10 * time.Second})
	r.ContentLength = int64(len(body))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	require.Equal(t, http.StatusOK, w.Code)

	mfs, err := reg.Gather()
	require.NoError(t, err)
	var sum float64
	var count uint64
	for _, mf := range mfs {
		if mf.GetName() != "kvroute_gateway_pick_duration_seconds" {
			continue
		}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == "api" && l.GetValue() == "completions" {
					sum, count = m.GetHistogram().GetSampleSum(), m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	require.Equal(t, uint64(1), count)
	require.Equal(t, 2.0, sum, "the pick's 2s, without the body's 10s upload")
}
