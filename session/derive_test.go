package session_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/session"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
	"github.com/kvroute/kvroute/telemetry"
)

// chatBody is turn k of conversation conv: a system prompt, then k+1 user
// messages with the assistant's answers between them.
func chatBody(conv string, k int) string {
	msgs := []string{`{"role":"system","content":"You are a coding agent. Use the tools you are given."}`}
	for i := 0; i <= k; i++ {
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":"%s step %d: run the tests and read the output of tool call %d"}`, conv, i, i))
		if i < k {
			msgs = append(msgs, fmt.Sprintf(`{"role":"assistant","content":"calling tool %d for %s"}`, i, conv))
		}
	}
	return `{"model":"` + testModel + `","max_tokens":2,"messages":[` + strings.Join(msgs, ",") + `]}`
}

// With Derive, a request without a session header or cookie is keyed by
// its opening's block key, rendered by a real simulated vLLM engine: the
// key is the last full block key the Router computes for the conversation's
// system prompt and first user message, every turn of the conversation
// gets it (and holds that block among its own keys), another conversation
// gets another, and the opening is rendered once per conversation.
func TestDerivedKeyIsTheOpeningsBlockKey(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	eng, ep := startRenderer(t)
	reg := prometheus.NewRegistry()
	cp := &capture{}
	a, err := session.New(session.Config{Derive: true}, session.Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	t.Cleanup(a.Close)
	cp.next = a.Profile(nil)
	r := deriveRouter(t, a, cp, telemetry.Set{Registerer: reg}, ep)
	ctx := context.Background()
	eps := []kvroute.Endpoint{ep}

	// The Router's own keys of the opening alone (system + first user),
	// read through the stages the Router hands its profile (captured by
	// the first pick below).
	var want string
	openingKey := func() string {
		st := cp.stages.(interface {
			Keys(*kvroute.Selection) []kvindex.Key
		})
		s, err := r.Match(ctx, &kvroute.Request{API: render.APIChatCompletions, Body: []byte(chatBody("conv-a", 0))}, eps)
		require.NoError(t, err)
		defer s.Release()
		keys := st.Keys(s)
		require.NotEmpty(t, keys, "the opening fills at least one block")
		return "b:" + strconv.FormatUint(uint64(keys[len(keys)-1]), 16)
	}

	for k := range 4 {
		before := eng.Tokenizations()
		req := &kvroute.Request{API: render.APIChatCompletions, Body: []byte(chatBody("conv-a", k))}
		d, err := r.Pick(ctx, req, eps)
		require.NoError(t, err)
		// The pick's own render, and the opening's on the first turn only.
		renders := uint64(1)
		if k == 0 {
			renders = 2
		}
		require.Equal(t, renders, eng.Tokenizations()-before, "turn %d", k)
		if k == 0 {
			want = openingKey()
		}
		require.Equal(t, want, req.Session, "turn %d", k)
		d.Done(kvroute.DoneInfo{})

		st := cp.stages.(interface {
			Keys(*kvroute.Selection) []kvindex.Key
		})
		s, err := r.Match(ctx, &kvroute.Request{API: render.APIChatCompletions, Body: []byte(chatBody("conv-a", k))}, eps)
		require.NoError(t, err)
		require.Contains(t, hexKeys(st.Keys(s)), want, "turn %d holds the opening's block", k)
		s.Release()
	}
	require.Equal(t, 4.0, counterOf(t, reg, "kvroute_session_keys_total", "source", "derived"))

	req := &kvroute.Request{API: render.APIChatCompletions, Body: []byte(chatBody("conv-b", 2))}
	d, err := r.Pick(ctx, req, eps)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(req.Session, "b:"))
	require.NotEqual(t, want, req.Session, "another opening, another key")
	d.Done(kvroute.DoneInfo{})

	// An opening shorter than a block: the text hash.
	short := `{"model":"` + testModel + `","messages":[{"role":"user","content":"hi"}]}`
	req = &kvroute.Request{API: render.APIChatCompletions, Body: []byte(short)}
	d, err = r.Pick(ctx, req, eps)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(req.Session, "d:"), req.Session)
	d.Done(kvroute.DoneInfo{})
}

func hexKeys[K ~uint64](ks []K) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = "b:" + strconv.FormatUint(uint64(k), 16)
	}
	return out
}

func counterOf(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	f := &fixture{reg: reg}
	return f.counter(t, name, label, value)
}

// capture is a Profile that remembers the stages the Router hands it (their
// Keys method reads a Selection's block keys) and defers to next.
type capture struct {
	next   kvroute.Profile
	stages kvroute.Picker
}

// Pick records stages and runs next.
func (c *capture) Pick(ctx context.Context, req *kvroute.Request, endpoints []kvroute.Endpoint, stages kvroute.Picker) (*kvroute.Decision, error) {
	c.stages = stages
	return c.next.Pick(ctx, req, endpoints, stages)
}

// Conversations that open alike under different cache salts (tenants) get
// different derived keys, each the block key of its own opening as a
// Profile that never saw the other derives it: the opening's memo is not
// shared across salts, whose block keys differ.
func TestDerivedKeySeparatesCacheSalts(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	_, ep := startRenderer(t)
	eps := []kvroute.Endpoint{ep}
	ctx := context.Background()

	salted := func(salt string) []byte {
		b := chatBody("conv-a", 1)
		return []byte(strings.Replace(b, `{"model"`, `{"cache_salt":"`+salt+`","model"`, 1))
	}
	// derive returns the derived keys of bodies, picked in order through a
	// fresh Affinity and Router.
	derive := func(bodies ...[]byte) []string {
		a, err := session.New(session.Config{Derive: true}, session.Options{})
		require.NoError(t, err)
		defer a.Close()
		r := deriveRouter(t, a, a.Profile(nil), telemetry.Set{}, ep)
		defer r.Close() // before a: a Router per call
		var keys []string
		for _, b := range bodies {
			req := &kvroute.Request{API: render.APIChatCompletions, Body: b}
			d, err := r.Pick(ctx, req, eps)
			require.NoError(t, err)
			d.Done(kvroute.DoneInfo{})
			require.True(t, strings.HasPrefix(req.Session, "b:"), req.Session)
			keys = append(keys, req.Session)
		}
		return keys
	}
	both := derive(salted("tenant-a"), salted("tenant-b"))
	require.NotEqual(t, both[0], both[1], "another cache salt, another key")
	require.Equal(t, derive(salted("tenant-b"))[0], both[1], "tenant-b's key does not depend on tenant-a's turn before it")
}

// startRenderer starts a simulated vLLM engine on loopback that renders
// (16-token blocks, vLLM's token-in routes served) and returns it with its
// endpoint; the test's cleanup closes it.
func startRenderer(t *testing.T) (*server.Server, kvroute.Endpoint) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	eng, err := server.New(server.Config{Model: testModel, EnableScaleOut: true,
		Engine: simengine.Config{BlockSize: 16, NumGPUBlocks: 256, PrefillTokensPerSecond: 1e7, DecodeStep: time.Millisecond}}, server.Options{})
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- eng.Serve(ln) }()
	t.Cleanup(func() { require.NoError(t, eng.Close()); <-served })
	return eng, kvroute.Endpoint{ID: ln.Addr().String()}
}

// deriveRouter is a Router over ep (render on, KV events off) with a's
// scorer and profile as its profile step; the test's cleanup closes it.
func deriveRouter(t *testing.T, a *session.Affinity, profile kvroute.Profile, set telemetry.Set, ep kvroute.Endpoint) *kvroute.Router {
	t.Helper()
	rc := kvroute.DefaultConfig()
	rc.Model, rc.BlockSize = testModel, 16
	rc.Events.Enabled = new(false)
	r, err := kvroute.New(context.Background(), rc, kvroute.Options{Set: set,
		Scorers: []kvroute.WeightedScorer{a.Scorer()}, Profile: profile})
	require.NoError(t, err)
	t.Cleanup(r.Close)
	require.NoError(t, r.SetEndpoints([]kvroute.Endpoint{ep}))
	return r
}
