package kvroute

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
)

// Decisions made without cache information for a reason the router can
// name are counted by reason and warned about once a minute per reason.
func TestCacheBlindDecisionsAreCountedAndWarnedOncePerInterval(t *testing.T) {
	reg := prometheus.NewRegistry()
	logs := &logBuffer{}
	clock := newFakeClock()
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) },
		Options{Set: telemetry.Set{Registerer: reg, Clock: clock, Logger: slog.New(slog.NewTextHandler(logs, nil))}})
	require.Equal(t, 1, logs.count("KV events are disabled"), "New warns that events are off")
	eps := endpoints(2)
	blind := func(reason string) float64 {
		v, _ := gathered(t, reg, "kvroute_router_cache_blind_total", reason)
		return v
	}
	for i := 0; i < 3; i++ {
		d, err := r.Pick(context.Background(), &Request{}, eps) // no prompts, render off
		require.NoError(t, err)
		d.Done(DoneInfo{})
		d = pick(t, r, prompt(i, 640), eps) // nothing indexed, events off
		d.Done(DoneInfo{})
	}
	require.Equal(t, 3.0, blind("render_disabled"))
	require.Equal(t, 3.0, blind("events_disabled"))
	require.Zero(t, blind("render_failed"))
	require.Equal(t, 1, logs.count("reason=render_disabled"))
	require.Equal(t, 1, logs.count("reason=events_disabled"))

	// A decision that used the cache is not blind.
	engineStores(t, r.Index(), eps[0].ID, prompt(9, 640), 1)
	d := pick(t, r, prompt(9, 640), eps)
	require.True(t, d.UsedCache)
	d.Done(DoneInfo{})
	require.Equal(t, 3.0, blind("events_disabled"))

	clock.Add(blindWarnInterval)
	d = pick(t, r, prompt(99, 640), eps)
	d.Done(DoneInfo{})
	require.Equal(t, 2, logs.count("reason=events_disabled"), "warned again after the interval")
}

// The render fallback is counted as cache-blind with reason render_failed.
func TestRenderFailureIsCountedCacheBlind(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"message":"The model does not exist.","type":"NotFoundError","param":null,"code":404}}`))
	}))
	defer srv.Close()
	reg := prometheus.NewRegistry()
	r := testRouter(t, func(c *Config) { c.DisableRender = false; c.Render.URL = srv.URL }, Options{Set: telemetry.Set{Registerer: reg}})
	d, err := r.Pick(context.Background(), &Request{API: render.APICompletions, Body: []byte(`{"prompt":"x"}`)}, endpoints(2))
	require.NoError(t, err)
	require.Error(t, d.RenderErr)
	d.Done(DoneInfo{})
	v, _ := gathered(t, reg, "kvroute_router_cache_blind_total", "render_failed")
	require.Equal(t, 1.0, v)
}

// namingRegisterer records the names of the metrics registered through it.
type namingRegisterer struct {
	prometheus.Registerer
	names []string
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (n *namingRegisterer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			n.names = append(n.names, m[1])
		}
	}
	return n.Registerer.Register(c)
}

func (n *namingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := n.Register(c); err != nil {
			panic(err)
		}
	}
}

// Every metric family a cache-blind warning points the operator to exists
// in a router that renders.
func TestCacheBlindHintsNameMetricsThatExist(t *testing.T) {
	reg := &namingRegisterer{Registerer: prometheus.NewRegistry()}
	testRouter(t, func(c *Config) { c.DisableRender = false }, Options{Set: telemetry.Set{Registerer: reg}})
	named := regexp.MustCompile(`\b([a-z_:]+)_\*`)
	checked := 0
	for _, hint := range blindHints {
		for _, m := range named.FindAllStringSubmatch(hint, -1) {
			checked++
			require.True(t, slices.ContainsFunc(reg.names, func(n string) bool { return strings.HasPrefix(n, m[1]+"_") }),
				"hint %q names %s_*, but the router registers no such metric: %v", hint, m[1], reg.names)
		}
	}
	require.Positive(t, checked)
}

// A completions request carrying prompt_embeds is routed by load without a
// render call and counted under prompt_embeds: vLLM keys each block of such
// a prompt with the SHA-256 of its embeddings (vllm/v1/core/
// kv_cache_utils.py, _gen_prompt_embeds_extra_hash_keys), so keys of its
// token IDs would be keys the engine never produces. A null or empty
// prompt_embeds, or one nested in another member, is no prompt embedding.
func TestPromptEmbedsRouteBlindWithoutRender(t *testing.T) {
	var renders atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		renders.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[{"token_ids":[1,2,3,4],"sampling_params":{}}]`))
	}))
	defer srv.Close()
	reg := prometheus.NewRegistry()
	r := testRouter(t, func(c *Config) { c.DisableRender = false; c.Render.URL = srv.URL }, Options{Set: telemetry.Set{Registerer: reg}})
	blind := func(reason string) float64 {
		v, _ := gathered(t, reg, "kvroute_router_cache_blind_total", reason)
		return v
	}
	for _, body := range []string{
		`{"model":"m","prompt_embeds":"UEsDBAAACAgAAAAAAAAAAAAAAAAAAAAAAAAA"}`,
		`{"model":"m","prompt":"x","prompt_embeds":["UEsDBA=="]}`,
		`{"prompt_embeds":null,"prompt_embeds":"UEsDBA=="}`,
		`{"model":"m","prompt\u005fembeds":"UEsDBA=="}`, // the name escaped, as json.loads decodes it
	} {
		d, err := r.Pick(context.Background(), &Request{API: render.APICompletions, Body: []byte(body)}, endpoints(2))
		require.NoError(t, err)
		require.ErrorIs(t, d.RenderErr, errPromptEmbeds, body)
		d.Done(DoneInfo{})
	}
	require.Equal(t, 4.0, blind("prompt_embeds"))
	require.Zero(t, blind("render_failed"))
	require.Zero(t, renders.Load(), "the renderer is not asked")

	for _, body := range []string{
		`{"prompt":"x","prompt_embeds":null}`,
		`{"prompt":"x","prompt_embeds":[ ]}`,
		`{"prompt":"x","prompt_embeds":"UEsDBA==","prompt_embeds":null}`,
		`{"prompt":"x","vllm_xargs":{"prompt_embeds":"UEsDBA=="}}`,
	} {
		d, err := r.Pick(context.Background(), &Request{API: render.APICompletions, Body: []byte(body)}, endpoints(2))
		require.NoError(t, err)
		require.NoError(t, d.RenderErr, body)
		d.Done(DoneInfo{})
	}
	require.Equal(t, 4.0, blind("prompt_embeds"))
	require.Equal(t, int64(4), renders.Load())
}

// A prompt whose multimodal items are raw media the engine resolves itself
// (render.Prompt.RawMedia: a token-in request's content_parts) is routed
// by load and counted under raw_media: the engine expands the items'
// placeholders and keys their blocks by their hashes, so keys of the
// given token IDs are not the engine's from the first item on, and where
// that item lies is unknown. None of its keys is looked up or speculated:
// a later request with the same token IDs, keyed as text, finds nothing
// this one left (with other media it would otherwise match a guess the
// engine never confirms).
func TestRawMediaPromptsRouteBlind(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := testRouter(t, nil, Options{Set: telemetry.Set{Registerer: reg}})
	toks := prompt(1, 4*64)
	d, err := r.Pick(context.Background(), &Request{Prompts: []render.Prompt{{TokenIDs: toks, RawMedia: true}}}, endpoints(2))
	require.NoError(t, err)
	require.ErrorIs(t, d.RenderErr, errRawMedia)
	require.False(t, d.UsedCache)
	d.Done(DoneInfo{})
	v, _ := gathered(t, reg, "kvroute_router_cache_blind_total", "raw_media")
	require.Equal(t, 1.0, v)

	d, err = r.Pick(context.Background(), &Request{Prompts: []render.Prompt{{TokenIDs: toks}}}, endpoints(2))
	require.NoError(t, err)
	require.NoError(t, d.RenderErr)
	require.False(t, d.UsedCache, "the raw-media request speculated no keys")
	require.Zero(t, d.CachedTokens)
	d.Done(DoneInfo{})
}
