package session_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/session"
	"github.com/kvroute/kvroute/telemetry"
)

// The openings' memo (Config.Derive) forgets a derived key when its
// opening was rendered longer ago than the TTL, or when its shard is full
// and another opening needs the room; either way the conversation's next
// turn renders its opening again, and each forgotten key is counted in
// kvroute_session_derived_keys_dropped_total by reason.
func TestDerivedKeyMemoDropsAreCounted(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	eng, ep := startRenderer(t)
	reg := prometheus.NewRegistry()
	clk := telemetry.NewManual(time.Unix(1_700_000_000, 0))
	a, err := session.New(session.Config{Derive: true, MaxEntries: 1, TTL: time.Minute},
		session.Options{Set: telemetry.Set{Registerer: reg, Clock: clk}})
	require.NoError(t, err)
	t.Cleanup(a.Close)
	r := deriveRouter(t, a, a.Profile(nil), telemetry.Set{}, ep)
	ctx := context.Background()
	eps := []kvroute.Endpoint{ep}

	// turn picks turn k of conv and returns its key and the renders it took.
	turn := func(conv string, k int) (string, uint64) {
		t.Helper()
		before := eng.Tokenizations()
		req := &kvroute.Request{API: render.APIChatCompletions, Body: []byte(chatBody(conv, k))}
		d, err := r.Pick(ctx, req, eps)
		require.NoError(t, err)
		d.Done(kvroute.DoneInfo{})
		require.True(t, strings.HasPrefix(req.Session, "b:"), req.Session)
		return req.Session, eng.Tokenizations() - before
	}
	dropped := func(reason string) float64 {
		return counterOf(t, reg, "kvroute_session_derived_keys_dropped_total", "reason", reason)
	}

	keyA, renders := turn("conv-a", 0)
	require.EqualValues(t, 2, renders, "the pick and the opening")
	_, renders = turn("conv-a", 1)
	require.EqualValues(t, 1, renders, "the opening is remembered")
	require.Zero(t, dropped("evicted"))

	keyB, _ := turn("conv-b", 0) // the memo holds one opening: conv-a's goes
	require.Equal(t, 1.0, dropped("evicted"))
	require.Zero(t, dropped("expired"))
	again, renders := turn("conv-a", 2)
	require.Equal(t, keyA, again)
	require.EqualValues(t, 2, renders, "a forgotten opening is rendered again")
	require.Equal(t, 2.0, dropped("evicted"), "conv-b's opening made room for conv-a's")

	clk.Advance(time.Minute + time.Second) // conv-a's opening is past the TTL
	again, renders = turn("conv-a", 3)
	require.Equal(t, keyA, again)
	require.EqualValues(t, 2, renders, "an expired opening is rendered again")
	require.Equal(t, 1.0, dropped("expired"))
	require.Equal(t, 2.0, dropped("evicted"))

	clk.Advance(time.Minute + time.Second)
	again, _ = turn("conv-b", 1) // conv-a's expired opening leaves for conv-b's
	require.Equal(t, keyB, again)
	require.Equal(t, 2.0, dropped("expired"))
	require.Equal(t, 2.0, dropped("evicted"))
}

// A conversation that keeps talking keeps its opening's key: each turn that
// finds the key refreshes it, so a conversation longer than the TTL whose
// turns come within the TTL of each other renders its opening once, as
// the session's own record is kept by each turn.
func TestDerivedKeyMemoIsRefreshedByEachTurn(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	eng, ep := startRenderer(t)
	reg := prometheus.NewRegistry()
	clk := telemetry.NewManual(time.Unix(1_700_000_000, 0))
	a, err := session.New(session.Config{Derive: true, TTL: time.Minute},
		session.Options{Set: telemetry.Set{Registerer: reg, Clock: clk}})
	require.NoError(t, err)
	t.Cleanup(a.Close)
	r := deriveRouter(t, a, a.Profile(nil), telemetry.Set{}, ep)
	ctx := context.Background()
	eps := []kvroute.Endpoint{ep}

	var first string
	for k := range 5 { // 5 turns 40 s apart: 2m40s, past twice the TTL
		before := eng.Tokenizations()
		req := &kvroute.Request{API: render.APIChatCompletions, Body: []byte(chatBody("long", k))}
		d, err := r.Pick(ctx, req, eps)
		require.NoError(t, err)
		d.Done(kvroute.DoneInfo{})
		renders := eng.Tokenizations() - before
		if k == 0 {
			first = req.Session
			require.EqualValues(t, 2, renders, "the pick and the opening")
		} else {
			require.Equal(t, first, req.Session)
			require.EqualValues(t, 1, renders, "turn %d: the opening is remembered", k)
		}
		clk.Advance(40 * time.Second)
	}
	require.Zero(t, counterOf(t, reg, "kvroute_session_derived_keys_dropped_total", "reason", "expired"))
}
