package models

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/testport"
	"github.com/kvroute/kvroute/telemetry"
)

// engine is a /v1/models server whose answer a test changes.
type engine struct {
	mu     sync.Mutex
	status int
	body   string
	srv    *httptest.Server
}

func newEngine(t *testing.T, ids ...string) *engine {
	e := &engine{status: http.StatusOK}
	e.set(ids...)
	e.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		defer e.mu.Unlock()
		if r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(e.status)
		_, _ = w.Write([]byte(e.body))
	}))
	// On a port outside the ephemeral range (testport): once a test closes
	// the engine, its polls are refused, not answered by another socket
	// that took the port.
	_ = e.srv.Listener.Close()
	e.srv.Listener = testport.Listen(t, "127.0.0.1")
	e.srv.Start()
	return e
}

func (e *engine) set(ids ...string) {
	var parts []string
	for _, id := range ids {
		b, _ := json.Marshal(id)
		parts = append(parts, fmt.Sprintf(`{"id":%s,"object":"model"}`, b))
	}
	e.mu.Lock()
	e.body = `{"object":"list","data":[` + strings.Join(parts, ",") + `]}`
	e.mu.Unlock()
}

func (e *engine) answer(status int, body string) {
	e.mu.Lock()
	e.status, e.body = status, body
	e.mu.Unlock()
}

func (e *engine) endpoint() kvroute.Endpoint {
	return kvroute.Endpoint{ID: strings.TrimPrefix(e.srv.URL, "http://")}
}

// stopPolling ends p's goroutine and keeps its metrics registered: the
// test then polls alone (PollOnce), and p.Close still unregisters them.
func stopPolling(p *Poller) {
	p.cancel()
	<-p.done
}

// newTestPoller is a poller on a manual clock with an hour's interval: only
// the kick of a new endpoint and the test's PollOnce poll.
func newTestPoller(t *testing.T, reg prometheus.Registerer, onChange func()) *Poller {
	t.Helper()
	clock := telemetry.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p, err := NewPoller(PollConfig{Enabled: true, Interval: time.Hour, MaxModels: 3},
		Options{Set: telemetry.Set{Registerer: reg, Clock: clock}, OnChange: onChange})
	require.NoError(t, err)
	return p
}

func TestPollerReadsModelsAndKeepsTheLastGoodAnswer(t *testing.T) {
	defer leakcheck.Check(t)()
	reg := prometheus.NewRegistry()
	p := newTestPoller(t, reg, nil)
	defer p.Close()
	e := newEngine(t, "llama", "llama-lora")
	defer e.srv.Close()
	id := e.endpoint().ID
	p.mu.Lock()
	p.urls[id] = e.srv.URL // no kick: the test polls
	p.mu.Unlock()
	_, ok := p.Models(id)
	require.False(t, ok, "never answered")

	require.True(t, p.PollOnce(context.Background()))
	ms, ok := p.Models(id)
	require.True(t, ok)
	require.Equal(t, []string{"llama", "llama-lora"}, ms, "the engine's order: its base model first")
	require.False(t, p.PollOnce(context.Background()), "same answer: no change")

	m, err := newPollMetrics(reg)
	require.NoError(t, err)
	for _, c := range []struct {
		status int
		body   string
		reason string
	}{
		{http.StatusInternalServerError, "", failStatus},
		{http.StatusOK, "not json", failDecode},
		{http.StatusOK, `{"object":"list"}`, failDecode},
		{http.StatusOK, strings.Repeat(" ", maxPollBodyBytes+1), failDecode},
	} {
		e.answer(c.status, c.body)
		require.False(t, p.PollOnce(context.Background()))
		require.InDelta(t, 1, testutil.ToFloat64(m.failures.WithLabelValues(id, c.reason)), 0, c.reason)
		m.failures.WithLabelValues(id, c.reason).Add(0)
		ms, _ = p.Models(id)
		require.Equal(t, []string{"llama", "llama-lora"}, ms, "kept after %s", c.reason)
		m.failures.DeleteLabelValues(id, c.reason)
	}
	e.srv.Close()
	require.False(t, p.PollOnce(context.Background()))
	require.InDelta(t, 1, testutil.ToFloat64(m.failures.WithLabelValues(id, failConnect)), 0)

	// Bounded: invalid and repeated names and those beyond MaxModels (3)
	// are dropped and counted.
	e2 := newEngine(t, "a", "", "a", "b\x01", strings.Repeat("x", MaxNameBytes+1), "b", "c", "d")
	defer e2.srv.Close()
	id2 := e2.endpoint().ID
	p.mu.Lock()
	p.urls = map[string]string{id2: e2.srv.URL} // no kick: the test polls
	p.mu.Unlock()
	p.PollOnce(context.Background())
	ms, _ = p.Models(id2)
	require.Equal(t, []string{"a", "b", "c"}, ms)
	require.InDelta(t, 5, testutil.ToFloat64(m.dropped.WithLabelValues(id2)), 0)
	p.SetEndpoints(nil) // nothing new: no kick
	_, ok = p.Models(id2)
	require.False(t, ok, "a removed endpoint is forgotten")
}

func TestPollerKicksOnNewEndpointsAndReportsChanges(t *testing.T) {
	defer leakcheck.Check(t)()
	var changes atomic.Int32
	changed := make(chan struct{}, 4)
	p := newTestPoller(t, nil, func() { changes.Add(1); changed <- struct{}{} })
	defer p.Close()
	e := newEngine(t, "alpha", "beta")
	defer e.srv.Close()
	p.SetEndpoints([]kvroute.Endpoint{e.endpoint()})
	select {
	case <-changed:
	case <-time.After(time.Minute): // a bound only: the kick polls at once
		t.Fatal("the new endpoint was not polled")
	}
	ms, ok := p.Models(e.endpoint().ID)
	require.True(t, ok)
	require.Equal(t, []string{"alpha", "beta"}, ms)
	require.EqualValues(t, 1, changes.Load())
}

func TestRegistryAnnotatesFromServedLabelThenPoll(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newEngine(t, "polled")
	defer e.srv.Close()
	r, err := New(Config{
		Served: map[string][]string{"10.0.0.1:8000": {"static"}},
		Poll:   PollConfig{Enabled: true, Interval: time.Hour},
	}, Options{Set: telemetry.Set{Clock: telemetry.NewManual(time.Unix(0, 0))}})
	require.NoError(t, err)
	defer r.Close()
	eps := []kvroute.Endpoint{
		{ID: "10.0.0.1:8000", Labels: map[string]string{DefaultLabel: "ignored"}},
		{ID: "10.0.0.2:8000", Labels: map[string]string{DefaultLabel: " a, b ,,a,bad\x01"}},
		e.endpoint(),
		{ID: "10.0.0.4:8000", Models: []string{"given"}},
	}
	r.poller.mu.Lock()
	r.poller.urls[e.endpoint().ID] = e.srv.URL
	r.poller.mu.Unlock()
	r.poller.PollOnce(context.Background())
	got := r.Annotate(eps)
	require.Equal(t, []string{"static"}, got[0].Models)
	require.Equal(t, []string{"a", "b"}, got[1].Models)
	require.Equal(t, []string{"polled"}, got[2].Models)
	require.Equal(t, []string{"given"}, got[3].Models)
	require.Nil(t, eps[0].Models, "the input is not modified")
	require.Equal(t, []string{"a", "b", "given", "polled", "static"}, Served(got, "base"))
	require.True(t, Serves(got, "polled", "base"))
	require.False(t, Serves(got, "base", "base"), "every endpoint lists models, none the base")
	require.True(t, Serves([]kvroute.Endpoint{{ID: "x:1"}}, "base", "base"))
}

func TestConfigJSON(t *testing.T) {
	var c Config
	require.NoError(t, c.UnmarshalJSON([]byte(`{"label":"x","poll":{"enabled":true,"interval":"5s"},"rewrites":[{"model":"m","targets":[{"model":"t","weight":3}]}]}`)))
	require.Equal(t, 5*time.Second, c.Poll.Interval)
	require.NoError(t, c.Validate())
	require.Error(t, c.UnmarshalJSON([]byte(`{"poll":{"interval":5}}`)), "a bare number is no duration")
	require.Error(t, c.UnmarshalJSON([]byte(`{"labelx":"x"}`)), "unknown key")
	require.ErrorIs(t, Config{Served: map[string][]string{"a:1": {""}}}.Validate(), ErrInvalidConfig)
	d := Config{}.withDefaults()
	require.Equal(t, DefaultLabel, d.Label)
	require.Equal(t, DefaultPollInterval, d.Poll.Interval)
}

// errHookCtx runs hook at its first Err call once armed: PollOnce calls
// Err after an endpoint's call failed, where a concurrent SetEndpoints may
// land before the failure is counted.
type errHookCtx struct {
	context.Context
	armed *atomic.Bool
	fired atomic.Bool
	hook  func()
}

func (c *errHookCtx) Err() error {
	if c.armed.Load() && c.fired.CompareAndSwap(false, true) {
		c.hook()
	}
	return c.Context.Err()
}

// An endpoint removed by SetEndpoints while PollOnce reads it (after its
// call, before its metrics are written) keeps no series: SetEndpoints
// forgot them, and the poll does not write them back.
func TestPollerLeavesNoSeriesOfEndpointRemovedMidPoll(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEngine(t)
	defer e.srv.Close()
	e.answer(http.StatusInternalServerError, "")
	p := newTestPoller(t, reg, nil)
	defer p.Close()
	stopPolling(p) // the test polls alone
	var served atomic.Bool
	inner := e.srv.Config.Handler
	e.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Store(true)
		inner.ServeHTTP(w, r)
	})
	ep := e.endpoint()
	p.SetEndpoints([]kvroute.Endpoint{ep})
	ctx := &errHookCtx{Context: context.Background(), armed: &served, hook: func() { p.SetEndpoints(nil) }}
	p.PollOnce(ctx)
	require.True(t, ctx.fired.Load(), "the endpoint was removed mid-poll")

	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				require.False(t, l.GetName() == "endpoint" && l.GetValue() == ep.ID,
					"%s{endpoint=%q} exists after the endpoint was removed", mf.GetName(), ep.ID)
			}
		}
	}
}

// A /v1/models answer that leaves no name to keep (every name dropped, or
// an empty list) is no good answer: the endpoint keeps the models of its
// last good one, or the Models it was given, instead of being annotated
// with none, which would make it serve the router's base model; it is
// counted as a decode failure, its names as dropped.
func TestPollAnswerKeepingNoNameKeepsThePreviousModels(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEngine(t, "llama")
	defer e.srv.Close()
	given := newEngine(t, "tenant,a")
	defer given.srv.Close()
	p := newTestPoller(t, reg, nil)
	defer p.Close()
	stopPolling(p) // the test polls alone
	eps := []kvroute.Endpoint{e.endpoint(), given.endpoint()}
	eps[1].Models = []string{"given"}
	p.SetEndpoints(eps)
	r := &Registry{cfg: Config{}.withDefaults(), poller: p}
	require.True(t, p.PollOnce(context.Background()))
	require.Equal(t, []string{"llama"}, r.Annotate(eps)[0].Models)

	m, err := newPollMetrics(reg)
	require.NoError(t, err)
	for i, body := range []string{
		`{"object":"list","data":[{"id":"tenant,a"},{"id":"b\u0001"}]}`,
		`{"object":"list","data":[]}`,
	} {
		e.answer(http.StatusOK, body)
		require.False(t, p.PollOnce(context.Background()), body)
		got := r.Annotate(eps)
		require.Equal(t, []string{"llama"}, got[0].Models, body)
		require.Equal(t, []string{"given"}, got[1].Models, "never answered with a name: the Models it was given")
		require.False(t, Serves(got, "base", "base"), "no endpoint serves the base model")
		require.InDelta(t, i+1, testutil.ToFloat64(m.failures.WithLabelValues(e.endpoint().ID, failDecode)), 0, body)
		require.InDelta(t, i+2, testutil.ToFloat64(m.failures.WithLabelValues(given.endpoint().ID, failDecode)), 0, "polled once before")
	}
	require.InDelta(t, 2, testutil.ToFloat64(m.dropped.WithLabelValues(e.endpoint().ID)), 0)
	_, ok := p.Models(given.endpoint().ID)
	require.False(t, ok, "an endpoint whose answers kept no name has no answer")
}

// vLLM lists each registered LoRA adapter with its base model as parent
// (and the base model with a null one): the poller learns which names are
// adapters of which model, ignores a parent that names no model of the
// answer, follows a change of the list (an adapter loaded or unloaded at
// run time) as a change, and forgets a removed endpoint's.
func TestPollerLearnsAdaptersFromParent(t *testing.T) {
	defer leakcheck.Check(t)()
	p := newTestPoller(t, prometheus.NewRegistry(), nil)
	defer p.Close()
	e := newEngine(t)
	defer e.srv.Close()
	e.answer(http.StatusOK, `{"object":"list","data":[{"id":"llama","root":"/models/llama","parent":null},`+
		`{"id":"sql","root":"/adapters/sql","parent":"llama"},{"id":"stray","parent":"gone"},{"id":"self","parent":"self"}]}`)
	ep := e.endpoint()
	p.mu.Lock()
	p.urls[ep.ID] = e.srv.URL // no kick: the test polls
	p.mu.Unlock()
	require.True(t, p.PollOnce(context.Background()))
	ms, _ := p.Models(ep.ID)
	require.Equal(t, []string{"llama", "sql", "stray"}, ms, "MaxModels (3) keeps the first three")
	base, ok := p.Parent(ep.ID, "sql")
	require.True(t, ok)
	require.Equal(t, "llama", base)
	for _, m := range []string{"llama", "stray", "self", "nobody"} {
		_, ok = p.Parent(ep.ID, m)
		require.False(t, ok, m)
	}
	r := &Registry{poller: p}
	base, ok = r.Adapter([]kvroute.Endpoint{{ID: "other"}, ep}, "sql")
	require.True(t, ok)
	require.Equal(t, "llama", base)
	_, ok = r.Adapter([]kvroute.Endpoint{{ID: "other"}}, "sql")
	require.False(t, ok, "no endpoint of the list says so")

	// An adapter loaded at run time: the same names otherwise.
	e.answer(http.StatusOK, `{"object":"list","data":[{"id":"llama"},{"id":"sql","parent":"llama"},{"id":"chat","parent":"llama"}]}`)
	require.True(t, p.PollOnce(context.Background()))
	base, ok = p.Parent(ep.ID, "chat")
	require.True(t, ok)
	require.Equal(t, "llama", base)
	// The same names, but sql is now listed as a model of its own.
	e.answer(http.StatusOK, `{"object":"list","data":[{"id":"llama"},{"id":"sql"},{"id":"chat","parent":"llama"}]}`)
	require.True(t, p.PollOnce(context.Background()), "a parent changed: a change")
	_, ok = p.Parent(ep.ID, "sql")
	require.False(t, ok)
	p.SetEndpoints(nil)
	_, ok = p.Parent(ep.ID, "chat")
	require.False(t, ok, "a removed endpoint is forgotten")
}

// kvroute_models_names_dropped_total's help names every reason the poller
// drops a name for (clean): invalid, overlong, repeated within one answer,
// beyond MaxModels. A repeated name was counted but its help did not say so.
func TestNamesDroppedHelpNamesEveryReason(t *testing.T) {
	m, err := newPollMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	desc := make(chan *prometheus.Desc, 1)
	m.dropped.Describe(desc)
	d := (<-desc).String()
	for _, reason := range []string{"invalid", "overlong", "repeated", "beyond the per-endpoint bound"} {
		require.Contains(t, d, reason)
	}
}

// The poller keeps each kept name's card as its engine gave it, and
// Registry.Cards merges them over the endpoints in endpoint-ID order,
// whatever the order of the endpoints it is given: owned_by and root the
// first known, max_model_len the least, parent the routing's (Adapter:
// Config.Adapters first, then the least base the engines report). A
// rewritten name has its served targets' owned_by and root where they
// agree (alias: llama's; canary: llama's and qwen's differ, gone is served
// by none) and the least of their max_model_len. A name no engine
// describes (Served) has its ID and the parent Config.Adapters gives it. A card member of the wrong type, overlong or
// not printable is left out and counted; its name is kept, and the rest of
// the answer read.
func TestRegistryCardsMergeTheEnginesCardsInIDOrder(t *testing.T) {
	defer leakcheck.Check(t)()
	reg := prometheus.NewRegistry()
	r, err := New(Config{Poll: PollConfig{Enabled: true, Interval: time.Hour},
		Adapters: map[string]string{"typo": "llama"},
		Rewrites: []Rule{{Model: "alias", Targets: []Target{{Model: "llama"}}},
			{Model: "canary", Targets: []Target{{Model: "llama", Weight: 1}, {Model: "qwen", Weight: 1}, {Model: "gone", Weight: 1}}}}},
		Options{Set: telemetry.Set{Registerer: reg, Clock: telemetry.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}})
	require.NoError(t, err)
	defer r.Close()
	a, b := newEngine(t), newEngine(t)
	defer a.srv.Close()
	defer b.srv.Close()
	if b.endpoint().ID < a.endpoint().ID {
		a, b = b, a
	}
	// a (the lesser ID) and b disagree on roots, lengths and sql's base.
	a.answer(http.StatusOK, `{"object":"list","data":[{"id":"llama","owned_by":"vllm","root":"/m/llama-a","parent":null,"max_model_len":8192,"permission":[{}]},`+
		`{"id":"sql","owned_by":"vllm","root":"/a/sql-a","parent":"llama","max_model_len":null},`+
		`{"id":"typo","root":null},{"id":"bad","root":7,"owned_by":"`+strings.Repeat("x", MaxCardFieldBytes+1)+`","max_model_len":-1},`+
		`{"id":"ctl","root":"a\u0007b","max_model_len":1.5}]}`)
	b.answer(http.StatusOK, `{"object":"list","data":[{"id":"llama","owned_by":"other","root":"/m/llama-b","max_model_len":4096},`+
		`{"id":"qwen"},{"id":"sql","root":"/a/sql-b","parent":"qwen"}]}`)
	eps := []kvroute.Endpoint{b.endpoint(), a.endpoint()} // b first: the merge goes by ID, not by this order
	r.SetEndpoints(eps)
	require.Eventually(t, func() bool {
		_, okA := r.Poller().Models(a.endpoint().ID)
		_, okB := r.Poller().Models(b.endpoint().ID)
		return okA && okB
	}, time.Minute, time.Millisecond)
	annotated := r.Annotate(eps)
	want := []Card{
		{ID: "alias", OwnedBy: "vllm", Root: "/m/llama-a", MaxModelLen: 4096},
		{ID: "bad"},
		{ID: "canary", MaxModelLen: 4096},
		{ID: "ctl"},
		{ID: "llama", OwnedBy: "vllm", Root: "/m/llama-a", MaxModelLen: 4096},
		{ID: "qwen"},
		{ID: "sql", OwnedBy: "vllm", Root: "/a/sql-a", Parent: "llama"},
		{ID: "typo", Parent: "llama"},
	}
	require.Equal(t, want, r.Cards(annotated, "llama"))
	slices.Reverse(annotated)
	require.Equal(t, want, r.Cards(annotated, "llama"), "the same whatever the endpoints' order")
	require.Equal(t, 5.0, testutil.ToFloat64(r.Poller().met.fields.WithLabelValues(a.endpoint().ID)),
		"bad's root, owned_by and max_model_len, ctl's root and max_model_len")
	require.Zero(t, testutil.ToFloat64(r.Poller().met.fields.WithLabelValues(b.endpoint().ID)))
	base, ok := r.Adapter(annotated, "sql")
	require.True(t, ok)
	require.Equal(t, "llama", base, "the least base the engines give, in either order")
}
