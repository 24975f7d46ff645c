package disagg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/render"
)

const testModel = "test-model"

// fleet is a real Router with the Profile as its profile step, over
// endpoints with roles: two prefill, two decode.
type fleet struct {
	r   *kvroute.Router
	p   *Profile
	eps []kvroute.Endpoint
	reg *prometheus.Registry
}

func newFleet(t *testing.T, cfg Config, opts Options, roles ...string) *fleet {
	t.Helper()
	if roles == nil {
		roles = []string{RolePrefill, RolePrefill, RoleDecode, RoleDecode}
	}
	reg := prometheus.NewRegistry()
	opts.Registerer = reg
	p, err := New(cfg, opts)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	rc := kvroute.DefaultConfig()
	rc.Model = testModel
	rc.Events.Enabled = new(false)
	rc.DisableRender = true
	r, err := kvroute.New(context.Background(), rc, kvroute.Options{Profile: p})
	require.NoError(t, err)
	t.Cleanup(r.Close)
	eps := make([]kvroute.Endpoint, len(roles))
	for i, role := range roles {
		eps[i] = kvroute.Endpoint{ID: fmt.Sprintf("10.0.0.%d:8000", i+1), Role: role}
	}
	return &fleet{r: r, p: p, eps: eps, reg: reg}
}

// prompt returns n tokens unique to seed.
func prompt(seed, n int) []uint32 {
	t := make([]uint32, n)
	for i := range t {
		t[i] = uint32(seed*1_000_003 + i)
	}
	return t
}

// stores feeds the index what the engine's BlockStored events would: every
// full block of tokens, cached on endpoint.
func (f *fleet) stores(t *testing.T, endpoint string, tokens []uint32, hashBase uint64) {
	t.Helper()
	ix := f.r.Index()
	bs := ix.BlockSize()
	n := len(tokens) / bs
	hashes := make([]uint64, n)
	for i := range hashes {
		hashes[i] = hashBase + uint64(i)
	}
	require.NoError(t, ix.Store(endpoint, &kvindex.StoreEvent{
		EngineHashes: hashes, Tokens: tokens[:n*bs], BlockSize: bs, Model: testModel, Group: -1,
	}))
}

func (f *fleet) pick(t *testing.T, id string, tokens []uint32) *kvroute.Decision {
	t.Helper()
	d, err := f.r.Pick(context.Background(), &kvroute.Request{ID: id, Prompts: []render.Prompt{{TokenIDs: tokens}}}, f.eps)
	require.NoError(t, err)
	return d
}

func (f *fleet) load(t *testing.T, id string) [2]int64 {
	t.Helper()
	tok, req, _ := f.r.Load().Load(id)
	return [2]int64{tok, req}
}

func (f *fleet) decisions(outcome, reason string) float64 {
	return testutil.ToFloat64(f.p.met.decisionsVec.WithLabelValues(outcome, reason))
}

func (f *fleet) picks(role string) float64 {
	return testutil.ToFloat64(f.p.met.picksVec.WithLabelValues(role))
}

func (f *fleet) requireIdle(t *testing.T) {
	t.Helper()
	for _, e := range f.eps {
		require.Equal(t, [2]int64{}, f.load(t, e.ID), e.ID)
	}
}

// A long prompt no decode endpoint holds is split: the decode endpoint is
// charged an open request and no prompt tokens, the prefill endpoint the
// prompt until the first chunk (its one token), and one Done releases the
// rest.
func TestLongNewPromptIsSplit(t *testing.T) {
	f := newFleet(t, Config{}, Options{})
	d := f.pick(t, "r1", prompt(1, 4096))
	require.Equal(t, RoleDecode, d.Endpoint.Role)
	require.Len(t, d.Roles, 1)
	pre := d.Roles[0]
	require.Equal(t, RolePrefill, pre.Endpoint.Role)
	require.Zero(t, d.UncachedTokens)
	require.EqualValues(t, 4096, pre.UncachedTokens)
	require.Equal(t, [2]int64{0, 1}, f.load(t, d.Endpoint.ID))
	require.Equal(t, [2]int64{4096, 1}, f.load(t, pre.Endpoint.ID))

	d.FirstChunk()
	require.Equal(t, [2]int64{0, 1}, f.load(t, d.Endpoint.ID), "the decoder holds its request until the end")
	require.Equal(t, [2]int64{0, 0}, f.load(t, pre.Endpoint.ID), "the prefiller is done at its one token")
	d.Done(kvroute.DoneInfo{})
	d.Done(kvroute.DoneInfo{})
	f.requireIdle(t)
	require.Nil(t, f.r.Decision("r1"))
	require.Equal(t, 1.0, f.decisions(outcomeSplit, "uncached"))
	require.Equal(t, 1.0, f.picks(RoleDecode))
	require.Equal(t, 1.0, f.picks(RolePrefill))
}

// A request of an API outside Config.SplitAPIs (by default Messages and
// Responses: the default lists completions and chat completions, what
// every routing sidecar splits) stays local, counted as reason "api": it
// was split, and the prefill endpoint was charged the prompt of a request
// it never got. Completions and chat completions, and a request naming no
// API (pre-tokenized prompts), split as before.
func TestAPIWithoutSplitStaysLocal(t *testing.T) {
	f := newFleet(t, Config{}, Options{})
	for i, api := range []render.API{render.APIMessages, render.APIResponses} {
		id := fmt.Sprintf("r%d", i)
		d, err := f.r.Pick(context.Background(), &kvroute.Request{ID: id, API: api, Prompts: []render.Prompt{{TokenIDs: prompt(10+i, 4096)}}}, f.eps)
		require.NoError(t, err)
		require.Equal(t, RoleDecode, d.Endpoint.Role)
		require.Empty(t, d.Roles, api)
		require.EqualValues(t, 4096, d.UncachedTokens, "the decode endpoint prefills it")
		for _, e := range f.eps {
			if e.Role == RolePrefill {
				require.Equal(t, [2]int64{}, f.load(t, e.ID), "no prefill endpoint is charged (%s)", api)
			}
		}
		d.Done(kvroute.DoneInfo{})
	}
	require.Equal(t, 2.0, f.decisions(outcomeLocal, "api"))
	require.Zero(t, f.picks(RolePrefill))
	f.requireIdle(t)

	for i, api := range []render.API{render.APICompletions, render.APIChatCompletions, ""} {
		d, err := f.r.Pick(context.Background(), &kvroute.Request{ID: fmt.Sprintf("s%d", i), API: api, Prompts: []render.Prompt{{TokenIDs: prompt(20+i, 4096)}}}, f.eps)
		require.NoError(t, err)
		require.Len(t, d.Roles, 1, api)
		d.Done(kvroute.DoneInfo{})
	}
	require.Equal(t, 3.0, f.decisions(outcomeSplit, "uncached"))
	f.requireIdle(t)
}

// Config.SplitAPIs chooses the APIs that may be split, for a routing
// sidecar that splits others (llm-d's newer one splits /v1/responses): a
// long Responses request is split when the list names responses, and a
// chat completion it does not name stays local, counted with reason api.
// Before, the APIs were fixed: Responses requests always stayed local.
func TestSplitAPIsConfigured(t *testing.T) {
	f := newFleet(t, Config{SplitAPIs: []render.API{render.APIResponses, render.APICompletions}}, Options{})
	require.Equal(t, []render.API{render.APIResponses, render.APICompletions}, f.p.Config().SplitAPIs)
	for i, api := range []render.API{render.APIResponses, render.APICompletions, ""} {
		d, err := f.r.Pick(context.Background(), &kvroute.Request{ID: fmt.Sprintf("s%d", i), API: api, Prompts: []render.Prompt{{TokenIDs: prompt(30+i, 4096)}}}, f.eps)
		require.NoError(t, err)
		require.Len(t, d.Roles, 1, api)
		d.Done(kvroute.DoneInfo{})
	}
	require.Equal(t, 3.0, f.decisions(outcomeSplit, "uncached"))
	for i, api := range []render.API{render.APIChatCompletions, render.APIMessages} {
		d, err := f.r.Pick(context.Background(), &kvroute.Request{ID: fmt.Sprintf("l%d", i), API: api, Prompts: []render.Prompt{{TokenIDs: prompt(40+i, 4096)}}}, f.eps)
		require.NoError(t, err)
		require.Empty(t, d.Roles, api)
		d.Done(kvroute.DoneInfo{})
	}
	require.Equal(t, 2.0, f.decisions(outcomeLocal, "api"))
	f.requireIdle(t)
}

// SplitAPIs follows the configuration convention: empty means the
// default (completions and chat completions), a value that names no API
// or is listed twice is an error naming it, and the JSON key is
// "splitAPIs".
func TestSplitAPIsConfig(t *testing.T) {
	require.Equal(t, DefaultSplitAPIs, Config{}.WithDefaults().SplitAPIs)
	require.Equal(t, DefaultSplitAPIs, Config{SplitAPIs: []render.API{}}.WithDefaults().SplitAPIs, "empty is the default")
	require.True(t, Config{}.SplitsAPI(render.APIChatCompletions))
	require.False(t, Config{}.SplitsAPI(render.APIResponses))
	require.True(t, Config{SplitAPIs: []render.API{render.APIResponses}}.SplitsAPI(render.APIResponses))
	require.False(t, Config{SplitAPIs: []render.API{render.APIResponses}}.SplitsAPI(render.APICompletions))

	c, err := LoadConfig(strings.NewReader(`{"splitAPIs":["completions","chat_completions","responses"]}`))
	require.NoError(t, err)
	require.Equal(t, []render.API{render.APICompletions, render.APIChatCompletions, render.APIResponses}, c.SplitAPIs)
	for _, bad := range []string{`{"splitAPIs":["Responses"]}`, `{"splitAPIs":["/v1/responses"]}`, `{"splitAPIs":["responses","responses"]}`, `{"splitAPIs":"responses"}`, `{"splitApis":["responses"]}`} {
		_, err := LoadConfig(strings.NewReader(bad))
		require.ErrorIs(t, err, ErrInvalidConfig, bad)
	}
	_, err = LoadConfig(strings.NewReader(`{"splitAPIs":["response"]}`))
	require.ErrorContains(t, err, `splitAPIs[0] "response" is not an API`)

	b, err := json.Marshal(Config{})
	require.NoError(t, err)
	require.NotContains(t, string(b), "splitAPIs", "the zero value writes no list")
	b, err = json.Marshal(Config{SplitAPIs: []render.API{render.APIResponses}})
	require.NoError(t, err)
	require.Contains(t, string(b), `"splitAPIs":["responses"]`)

	// The Profile keeps its own copy: neither the caller's slice nor the
	// one Config returns changes what it splits.
	apis := []render.API{render.APIResponses}
	p, err := New(Config{SplitAPIs: apis}, Options{})
	require.NoError(t, err)
	apis[0] = render.APIMessages
	p.Config().SplitAPIs[0] = render.APIMessages
	require.Equal(t, []render.API{render.APIResponses}, p.Config().SplitAPIs)
}

// A follow-up turn whose prefix the decode endpoint holds is prefilled
// there: the decode pick goes to the endpoint holding it and the few
// uncached tokens stay below the threshold. The first turn's speculative
// entries are enough: they went where the blocks land.
func TestFollowUpTurnOnDecoderIsLocal(t *testing.T) {
	f := newFleet(t, Config{}, Options{})
	turn1 := prompt(2, 4096)
	d1 := f.pick(t, "t1", turn1)
	require.Len(t, d1.Roles, 1)
	d1.FirstChunk()
	d1.Done(kvroute.DoneInfo{})

	turn2 := append(append([]uint32(nil), turn1...), prompt(3, 300)...)
	d2 := f.pick(t, "t2", turn2)
	require.Equal(t, d1.Endpoint.ID, d2.Endpoint.ID, "the decoder that holds the prefix")
	require.Empty(t, d2.Roles, "not split")
	require.EqualValues(t, 4096, d2.CachedTokens)
	require.Equal(t, [2]int64{d2.UncachedTokens, 1}, f.load(t, d2.Endpoint.ID), "local: the decoder prefills the rest")
	d2.Done(kvroute.DoneInfo{})
	f.requireIdle(t)
	require.Equal(t, 1.0, f.decisions(outcomeLocal, "cached"))
	require.Equal(t, 1.0, f.decisions(outcomeSplit, "uncached"))
}

// The same follow-up on a decode endpoint whose events say it holds the
// prefix (no speculation).
func TestDecoderEventsDecideLocal(t *testing.T) {
	f := newFleet(t, Config{}, Options{})
	prefix := prompt(4, 4096)
	f.stores(t, f.eps[3].ID, prefix, 100)
	d := f.pick(t, "", append(append([]uint32(nil), prefix...), prompt(5, 100)...))
	require.Equal(t, f.eps[3].ID, d.Endpoint.ID)
	require.Empty(t, d.Roles)
	d.Done(kvroute.DoneInfo{})
}

// The prefill endpoint holding the prefix is preferred, whichever is
// listed first.
func TestPrefillHoldingPrefixIsPreferred(t *testing.T) {
	f := newFleet(t, Config{}, Options{})
	doc := prompt(6, 8192)
	f.stores(t, f.eps[1].ID, doc, 200)
	d := f.pick(t, "", append(append([]uint32(nil), doc...), prompt(7, 64)...))
	require.Len(t, d.Roles, 1)
	require.Equal(t, f.eps[1].ID, d.Roles[0].Endpoint.ID)
	require.EqualValues(t, 64, d.Roles[0].UncachedTokens, "charged only what it computes")
	d.Done(kvroute.DoneInfo{})
	f.requireIdle(t)
}

// The decode pick weighs open requests, not prompt tokens: with equal
// caches the decoder with fewer requests open wins even when it has more
// prefill tokens in flight.
func TestDecodePickByOpenRequests(t *testing.T) {
	f := newFleet(t, Config{}, Options{})
	busy := f.r.Load().Dispatch(f.eps[2].ID, 0)
	busy2 := f.r.Load().Dispatch(f.eps[2].ID, 0)
	heavy := f.r.Load().Dispatch(f.eps[3].ID, 100000)
	defer busy.Done()
	defer busy2.Done()
	defer heavy.Done()
	d := f.pick(t, "", prompt(8, 2048))
	require.Equal(t, f.eps[3].ID, d.Endpoint.ID)
	d.Done(kvroute.DoneInfo{})
}

// Short prompts stay local; a negative threshold splits them all.
func TestThreshold(t *testing.T) {
	f := newFleet(t, Config{NonCachedTokens: 1000}, Options{})
	d := f.pick(t, "", prompt(9, 999))
	require.Empty(t, d.Roles)
	d.Done(kvroute.DoneInfo{})
	d = f.pick(t, "", prompt(10, 1000))
	require.Len(t, d.Roles, 1)
	d.Done(kvroute.DoneInfo{})

	always := newFleet(t, Config{NonCachedTokens: -1}, Options{})
	d = always.pick(t, "", prompt(11, 10))
	require.Len(t, d.Roles, 1)
	d.Done(kvroute.DoneInfo{})
}

// The prefill-load rule keeps the request local while every prefill
// endpoint is busier than MaxPrefillQueueTokens.
func TestPrefillBusyStaysLocal(t *testing.T) {
	f := newFleet(t, Config{MaxPrefillQueueTokens: 5000}, Options{})
	h1 := f.r.Load().Dispatch(f.eps[0].ID, 6000)
	h2 := f.r.Load().Dispatch(f.eps[1].ID, 5000)
	d := f.pick(t, "", prompt(12, 4096))
	require.Empty(t, d.Roles)
	require.Equal(t, [2]int64{4096, 1}, f.load(t, d.Endpoint.ID), "prefilled locally")
	d.Done(kvroute.DoneInfo{})
	require.Equal(t, 1.0, f.decisions(outcomeLocal, "prefill_busy"))

	h2.Done() // one prefill endpoint has room again
	d = f.pick(t, "", prompt(13, 4096))
	require.Len(t, d.Roles, 1)
	require.Equal(t, f.eps[1].ID, d.Roles[0].Endpoint.ID)
	d.Done(kvroute.DoneInfo{})
	h1.Done()
	f.requireIdle(t)
}

// Without prefill endpoints every request is local (counted); without
// decode endpoints there is nothing to route to.
func TestRolesMissing(t *testing.T) {
	f := newFleet(t, Config{}, Options{}, RoleDecode, RoleDecode)
	d := f.pick(t, "", prompt(14, 4096))
	require.Empty(t, d.Roles)
	d.Done(kvroute.DoneInfo{})
	require.Equal(t, 1.0, f.decisions(outcomeLocal, "no_prefill_endpoint"))

	f = newFleet(t, Config{}, Options{}, RolePrefill)
	_, err := f.r.Pick(context.Background(), &kvroute.Request{Prompts: []render.Prompt{{TokenIDs: prompt(15, 10)}}}, f.eps)
	require.ErrorIs(t, err, ErrNoDecodeEndpoint)
	require.ErrorIs(t, err, kvroute.ErrNoEndpoints)
}

// Endpoints of role both (or none) may take either part, never both parts
// of one request.
func TestBothRole(t *testing.T) {
	f := newFleet(t, Config{}, Options{}, RoleBoth, "")
	d := f.pick(t, "", prompt(16, 4096))
	require.Len(t, d.Roles, 1)
	require.NotEqual(t, d.Endpoint.ID, d.Roles[0].Endpoint.ID)
	d.Done(kvroute.DoneInfo{})
}

// A decode endpoint whose KV-event stream is not live is decided on what
// the index knows, and counted.
func TestDecodeWithoutEvents(t *testing.T) {
	silent := "10.0.0.4:8000"
	f := newFleet(t, Config{}, Options{EventsLive: func(id string) bool { return id != silent }})
	var open []*kvroute.Decision
	for i := range 4 {
		open = append(open, f.pick(t, "", prompt(20+i, 2048)))
	}
	for _, d := range open {
		d.Done(kvroute.DoneInfo{})
	}
	require.Equal(t, 2.0, testutil.ToFloat64(f.p.met.withoutEvents), "the two picks of the silent decoder (open requests alternate)")
	f.p.SetEventsLive(nil)
	d := f.pick(t, "", prompt(30, 2048))
	d.Done(kvroute.DoneInfo{})
	require.Equal(t, 2.0, testutil.ToFloat64(f.p.met.withoutEvents))
}

// A split request found by its ID and ended there, or dropped without its
// Done, releases both picks once; Release after Done changes nothing.
func TestSplitReleasedOnceByID(t *testing.T) {
	f := newFleet(t, Config{}, Options{})
	// Other requests' load on every endpoint: a second release would take
	// from it (the counters clamp at zero, so an idle fleet would hide it).
	for _, e := range f.eps {
		h := f.r.Load().Dispatch(e.ID, 1_000_000)
		defer h.Done()
	}
	d := f.pick(t, "x1", prompt(40, 4096))
	require.Len(t, d.Roles, 1)
	f.r.Decision("x1").Done(kvroute.DoneInfo{})
	d.FirstChunk()
	d.Done(kvroute.DoneInfo{})
	d.Release()
	for _, e := range f.eps {
		require.Equal(t, [2]int64{1_000_000, 1}, f.load(t, e.ID), e.ID)
	}

	_, err := f.r.Pick(context.Background(), &kvroute.Request{ID: "x2", Prompts: []render.Prompt{{TokenIDs: prompt(41, 4096)}}}, f.eps)
	require.NoError(t, err)
	_, err = f.r.Pick(context.Background(), &kvroute.Request{ID: "x2", Prompts: []render.Prompt{{TokenIDs: prompt(42, 4096)}}}, f.eps)
	require.Error(t, err, "the ID is in flight")
	f.r.Decision("x2").Release()
	for _, e := range f.eps {
		require.Equal(t, [2]int64{1_000_000, 1}, f.load(t, e.ID), e.ID)
	}
}

// A cancelled caller gets its error and nothing stays accounted.
func TestCancelled(t *testing.T) {
	f := newFleet(t, Config{}, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.r.Pick(ctx, &kvroute.Request{Prompts: []render.Prompt{{TokenIDs: prompt(50, 4096)}}}, f.eps)
	require.True(t, errors.Is(err, context.Canceled))
	f.requireIdle(t)
}

// The stages must be a Router's.
func TestForeignStages(t *testing.T) {
	p, err := New(Config{}, Options{})
	require.NoError(t, err)
	_, err = p.Pick(context.Background(), &kvroute.Request{}, []kvroute.Endpoint{{ID: "a:1"}}, foreign{})
	require.ErrorIs(t, err, errStages)
}

type foreign struct{}

func (foreign) Pick(context.Context, *kvroute.Request, []kvroute.Endpoint) (*kvroute.Decision, error) {
	return nil, nil
}

// RouterEventsLive: with events off no stream is live.
func TestRouterEventsLiveWithoutEvents(t *testing.T) {
	f := newFleet(t, Config{}, Options{})
	live := RouterEventsLive(f.r)
	require.False(t, live(f.eps[0].ID))
	f.p.SetEventsLive(live)
	d := f.pick(t, "", prompt(60, 100))
	d.Done(kvroute.DoneInfo{})
	require.Equal(t, 1.0, testutil.ToFloat64(f.p.met.withoutEvents))
}

// A Messages request that forces a named tool (tool_choice {"type":"tool"})
// stays local, counted with reason forced_tool, however long its prompt:
// vLLM serves it as a chat completion with a named tool choice, whose tool
// call's arguments are the generated text, and its Messages handler
// decodes them as JSON (json.loads in messages_full_converter, unguarded),
// so the one-token prefill answers 500 and every such request paid a
// prefill for nothing before its local one. Other tool choices of a
// Messages request (auto, any: vLLM parses "required" output leniently),
// chat completions forcing a tool (vLLM keeps the arguments as text) and a
// request without a body to read split as before.
func TestMessagesForcedToolStaysLocal(t *testing.T) {
	f := newFleet(t, Config{SplitAPIs: []render.API{render.APIMessages, render.APIChatCompletions}}, Options{})
	local := []string{
		`{"model":"m","max_tokens":9,"tools":[{"name":"get","input_schema":{}}],"tool_choice":{"type":"tool","name":"get"},"messages":[]}`,
		`{"tool_choice":{"name":"get","disable_parallel_tool_use":true,"type":"tool"}}`,
		"\ufeff" + `{"tool_choice":{"type":"auto"},"tool_choice":{"type":"tool","name":"get"}}`, // the last member wins, as in vLLM
	}
	for i, body := range local {
		d, err := f.r.Pick(context.Background(), &kvroute.Request{ID: fmt.Sprintf("l%d", i), API: render.APIMessages, Body: []byte(body),
			Prompts: []render.Prompt{{TokenIDs: prompt(50+i, 4096)}}}, f.eps)
		require.NoError(t, err)
		require.Empty(t, d.Roles, body)
		for _, e := range f.eps {
			if e.Role == RolePrefill {
				require.Equal(t, [2]int64{}, f.load(t, e.ID), "no prefill endpoint is charged (%s)", body)
			}
		}
		d.Done(kvroute.DoneInfo{})
	}
	require.Equal(t, 3.0, f.decisions(outcomeLocal, "forced_tool"))
	require.Zero(t, f.picks(RolePrefill))
	f.requireIdle(t)

	split := []struct {
		api  render.API
		body string
	}{
		{render.APIMessages, `{"tool_choice":{"type":"any"}}`},
		{render.APIMessages, `{"tool_choice":{"type":"auto"}}`},
		{render.APIMessages, `{"tool_choice":{"type":"none"}}`},
		{render.APIMessages, `{"tool_choice":{"type":"tool","name":"get"},"tool_choice":null}`},
		{render.APIMessages, `{"messages":[{"role":"user","content":"{\"tool_choice\":{\"type\":\"tool\"}}"}]}`},
		{render.APIMessages, `not json`},
		{render.APIMessages, ``},
		{render.APIChatCompletions, `{"tool_choice":{"type":"function","function":{"name":"get"}}}`},
		{render.APIChatCompletions, `{"tool_choice":{"type":"tool","name":"get"}}`}, // not a chat tool choice
	}
	for i, c := range split {
		d, err := f.r.Pick(context.Background(), &kvroute.Request{ID: fmt.Sprintf("s%d", i), API: c.api, Body: []byte(c.body),
			Prompts: []render.Prompt{{TokenIDs: prompt(60+i, 4096)}}}, f.eps)
		require.NoError(t, err)
		require.Len(t, d.Roles, 1, c.body)
		d.Done(kvroute.DoneInfo{})
	}
	require.Equal(t, float64(len(split)), f.decisions(outcomeSplit, "uncached"))
	require.Equal(t, 3.0, f.decisions(outcomeLocal, "forced_tool"))
	f.requireIdle(t)
}
