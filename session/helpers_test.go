package session_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/session"
	"github.com/kvroute/kvroute/telemetry"
)

const testModel = "test-model"

// fixture is a Router (events off, prompts given) with session affinity,
// on a manual clock and a fresh registry.
type fixture struct {
	r   *kvroute.Router
	a   *session.Affinity
	reg *prometheus.Registry
	clk *telemetry.Manual
	eps []kvroute.Endpoint
}

func newFixture(t testing.TB, cfg session.Config, n int) *fixture {
	t.Helper()
	f := &fixture{reg: prometheus.NewRegistry(), clk: telemetry.NewManual(time.Unix(1_700_000_000, 0))}
	a, err := session.New(cfg, session.Options{Set: telemetry.Set{Registerer: f.reg, Clock: f.clk}})
	require.NoError(t, err)
	t.Cleanup(a.Close)
	rc := kvroute.DefaultConfig()
	rc.Model = testModel
	rc.Events.Enabled = new(false)
	rc.DisableRender = true
	r, err := kvroute.New(context.Background(), rc, kvroute.Options{
		Set:     telemetry.Set{Clock: f.clk},
		Scorers: []kvroute.WeightedScorer{a.Scorer()},
		Profile: a.Profile(nil),
	})
	require.NoError(t, err)
	t.Cleanup(r.Close)
	f.r, f.a = r, a
	for i := range n {
		f.eps = append(f.eps, kvroute.Endpoint{ID: fmt.Sprintf("10.0.0.%d:8000", i+1)})
	}
	require.NoError(t, r.SetEndpoints(f.eps))
	return f
}

// prompt returns n tokens unique to seed: no two seeds share a block.
func prompt(seed, n int) []uint32 {
	t := make([]uint32, n)
	for i := range t {
		t[i] = uint32(seed*1_000_003 + i)
	}
	return t
}

func (f *fixture) pick(t testing.TB, hdr http.Header, tokens []uint32) *kvroute.Decision {
	t.Helper()
	d, err := f.r.Pick(context.Background(), &kvroute.Request{Header: hdr, Prompts: []render.Prompt{{TokenIDs: tokens}}}, f.eps)
	require.NoError(t, err)
	return d
}

func (f *fixture) counter(t testing.TB, name, label, value string) float64 {
	t.Helper()
	mfs, err := f.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			ok := label == ""
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					ok = true
				}
			}
			if ok {
				if m.GetCounter() != nil {
					return m.GetCounter().GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

var _ = testutil.ToFloat64

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}
