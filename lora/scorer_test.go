package lora

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/telemetry"
)

func TestRule(t *testing.T) {
	src := newStatic()
	s, err := New(Config{}, src, Options{})
	require.NoError(t, err)
	ep := kvroute.Endpoint{ID: "10.0.0.1:8000"}
	spread := HashSpread * rendezvous("sql", ep.ID)
	for _, tc := range []struct {
		name  string
		info  enginemetrics.LoRAInfo
		fresh bool
		want  float64
		state int
	}{
		{"running", enginemetrics.LoRAInfo{Reported: true, Running: []string{"sql"}, MaxLoRA: 1}, true, ScoreRunning, stRunning},
		{"waiting", enginemetrics.LoRAInfo{Reported: true, Running: []string{"x"}, Waiting: []string{"sql"}, MaxLoRA: 1}, true, ScoreWaiting, stWaiting},
		{"load into a free slot", enginemetrics.LoRAInfo{Reported: true, Running: []string{"x"}, MaxLoRA: 2}, true, ScoreLoad + spread, stLoad},
		{"load at the cap", enginemetrics.LoRAInfo{Reported: true, Running: []string{"x", "y"}, MaxLoRA: 2}, true, ScoreLoad - DefaultCapPenalty + spread, stLoadAtCap},
		{"no adapters reported", enginemetrics.LoRAInfo{}, true, ScoreLoad + spread, stLoad},
		{"stale: neutral", enginemetrics.LoRAInfo{Reported: true, Running: []string{"sql"}}, false, ScoreLoad + spread, stUnknown},
	} {
		src.set(ep.ID, tc.info, tc.fresh)
		v, st := s.rate("sql", ep)
		require.InDelta(t, tc.want, v, 1e-12, tc.name)
		require.Equal(t, tc.state, st, tc.name)
	}
}

// TestRunningBeatsWaitingBeatsLoad routes through a real Router: the
// endpoint running the adapter wins, then the one where it waits, then one
// with a free slot over one at its cap; a request without an adapter is
// routed by load alone.
func TestRunningBeatsWaitingBeatsLoad(t *testing.T) {
	src := newStatic()
	reg := prometheus.NewRegistry()
	s, err := New(Config{}, src, Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	r := testRouter(t, s.Weighted())
	eps := endpoints(4)
	src.set(eps[0].ID, enginemetrics.LoRAInfo{Reported: true, Running: []string{"a", "b"}, MaxLoRA: 2}, true)
	src.set(eps[1].ID, enginemetrics.LoRAInfo{Reported: true, Running: []string{"c"}, MaxLoRA: 2}, true)
	src.set(eps[2].ID, enginemetrics.LoRAInfo{Reported: true, Running: []string{"d"}, Waiting: []string{"e"}, MaxLoRA: 2}, true)
	src.set(eps[3].ID, enginemetrics.LoRAInfo{Reported: true, Running: []string{"f", "g"}, MaxLoRA: 2}, true)
	pick := func(adapter string) string {
		d, err := r.Pick(context.Background(), request(adapter, 256), eps)
		require.NoError(t, err)
		d.Done(kvroute.DoneInfo{})
		return d.Endpoint.ID
	}
	require.Equal(t, eps[0].ID, pick("a"))
	require.Equal(t, eps[1].ID, pick("c"))
	require.Equal(t, eps[2].ID, pick("e"))
	// "z" runs nowhere: eps[1] is the only one with a free slot and no
	// waiting adapter besides; eps[2]'s d and e fill its two slots.
	require.Equal(t, eps[1].ID, pick("z"))
	total := 0.0
	for _, c := range s.state {
		total += testutil.ToFloat64(c)
	}
	require.Equal(t, 4.0*4, total, "four candidates per adapter pick")

	// The running endpoint wins even against a lighter one.
	busy := r.Load().Dispatch(eps[0].ID, 100_000)
	require.Equal(t, eps[0].ID, pick("a"))
	busy.Done()
}

// TestSaturatedSpills: an engine running the adapter whose queue reached
// MaxWaiting scores as one that would load it, so the load scorer spreads
// a hot adapter.
func TestSaturatedSpills(t *testing.T) {
	src := newStatic()
	s, err := New(Config{MaxWaiting: 3}, src, Options{})
	require.NoError(t, err)
	ep := kvroute.Endpoint{ID: "10.0.0.1:8000"}
	src.set(ep.ID, enginemetrics.LoRAInfo{Reported: true, Running: []string{"a"}, MaxLoRA: 2}, true)
	src.setWaiting(ep.ID, 3)
	v, st := s.rate("a", ep)
	require.Equal(t, stSaturated, st)
	require.InDelta(t, ScoreLoad+HashSpread*rendezvous("a", ep.ID), v, 1e-12)
	v, st = s.rate("b", ep)
	require.Equal(t, stLoad, st, "an adapter it does not run: a plain load, no penalty for the queue")
	require.Less(t, v, ScoreLoad+HashSpread)
	s2, err := New(Config{MaxWaiting: -1}, src, Options{})
	require.NoError(t, err)
	_, st = s2.rate("a", ep)
	require.Equal(t, stRunning, st, "maxWaiting negative: never spills")
}

func TestNoAdapterScoresZero(t *testing.T) {
	src := newStatic()
	s, err := New(Config{}, src, Options{})
	require.NoError(t, err)
	r := testRouter(t, s.Weighted())
	eps := endpoints(3)
	d, err := r.Pick(context.Background(), request("", 64), eps)
	require.NoError(t, err)
	defer d.Done(kvroute.DoneInfo{})
	for i := range numStates {
		require.Zero(t, testutil.ToFloat64(s.state[i]), "no candidate counted for a request without an adapter")
	}
}

// TestStaleIsNeutralAndCounted: an endpoint with no fresh metrics scores as
// one that would load the adapter, never as one running it.
func TestStaleIsNeutralAndCounted(t *testing.T) {
	src := newStatic()
	s, err := New(Config{}, src, Options{})
	require.NoError(t, err)
	r := testRouter(t, s.Weighted())
	eps := endpoints(2)
	src.set(eps[0].ID, enginemetrics.LoRAInfo{Reported: true, Running: []string{"a"}, MaxLoRA: 1}, false)
	src.set(eps[1].ID, enginemetrics.LoRAInfo{Reported: true, Running: []string{"a"}, MaxLoRA: 1}, true)
	d, err := r.Pick(context.Background(), request("a", 64), eps)
	require.NoError(t, err)
	d.Done(kvroute.DoneInfo{})
	require.Equal(t, eps[1].ID, d.Endpoint.ID)
	require.Equal(t, 1.0, testutil.ToFloat64(s.state[stUnknown]))
	require.Equal(t, 1.0, testutil.ToFloat64(s.state[stRunning]))
}

// TestRendezvousPlacesNewAdaptersAlike: with no state anywhere, every
// scorer (as on every router replica) prefers the same endpoint for an
// adapter, and different adapters spread over the endpoints.
func TestRendezvousPlacesNewAdaptersAlike(t *testing.T) {
	eps := endpoints(4)
	seen := map[string]bool{}
	for _, a := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		best, bestV := "", -1.0
		for _, ep := range eps {
			if v := rendezvous(a, ep.ID); v > bestV {
				best, bestV = ep.ID, v
			}
			require.Equal(t, rendezvous(a, ep.ID), rendezvous(a, ep.ID))
		}
		seen[best] = true
	}
	require.Greater(t, len(seen), 1, "8 adapters all on one endpoint")
}

func TestConfig(t *testing.T) {
	c, err := LoadConfig(strings.NewReader(`{"weight": 2, "capPenalty": 0.1}`))
	require.NoError(t, err)
	require.Equal(t, Config{Weight: 2, CapPenalty: 0.1}, c)
	_, err = LoadConfig(strings.NewReader(`{"wieght": 2}`))
	require.ErrorContains(t, err, "wieght")
	_, err = LoadConfig(strings.NewReader(`{"weight": -1}`)) // LoadConfig validates
	require.ErrorContains(t, err, "weight")
	require.ErrorContains(t, Config{Weight: -1}.Validate(), "weight")
	require.ErrorContains(t, Config{CapPenalty: 0.5}.Validate(), "capPenalty")
	_, err = New(Config{}, nil, Options{})
	require.Error(t, err)
	d, err := New(Config{CapPenalty: -1}, newStatic(), Options{})
	require.NoError(t, err)
	require.Equal(t, Config{Weight: DefaultWeight, CapPenalty: 0, MaxWaiting: enginemetrics.DefaultWaitingThreshold}, d.Config())
}

func TestRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := New(Config{}, newStatic(), Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	_, err = New(Config{}, newStatic(), Options{Set: telemetry.Set{Registerer: reg}})
	require.Error(t, err, "a second scorer on the same registry")
	s.Close()
	s2, err := New(Config{}, newStatic(), Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err, "Close unregisters")
	s2.Close()
}

// The package documentation lists every state kvroute_lora_candidates_total
// counts, and its rule table the MaxWaiting rule behind "saturated".
func TestDocListsEveryCandidateState(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	text := strings.Join(strings.Fields(strings.ReplaceAll(string(doc), "//", " ")), " ")
	i := strings.Index(text, "kvroute_lora_candidates_total{state} counts")
	require.GreaterOrEqual(t, i, 0)
	open := strings.Index(text[i:], "(")
	closing := strings.Index(text[i:], ")")
	require.Positive(t, open)
	listed := strings.Split(text[i+open+1:i+closing], ", ")
	require.ElementsMatch(t, stateNames[:], listed)
	require.Contains(t, text, "saturated (running or waiting; ≥ MaxWaiting queued) ScoreLoad 0.4 + spread")
}
