package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

// tokenFleet is a gateway Server (precise policy, rendering on the engines,
// no KV events) in front of simulated engines with the render and token-in
// routes on.
type tokenFleet struct {
	engines []*server.Server
	served  []chan error
	gw      *Server
	client  *http.Client
}

func startTokenFleet(t *testing.T, n int, proxy Config) *tokenFleet {
	t.Helper()
	f := &tokenFleet{client: &http.Client{Transport: &http.Transport{}}}
	eps := f.startEngines(t, n)
	cfg := kvroute.DefaultConfig()
	cfg.Model = testModel
	cfg.BlockSize = 16
	cfg.Events.Enabled = new(false)
	var err error
	f.gw, err = NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: cfg, Endpoints: eps, Proxy: proxy}, Options{})
	require.NoError(t, err)
	return f
}

// startEngines starts n simulated engines (16-token blocks, vLLM's
// token-in routes served) on loopback into the fleet and returns them as
// the router's endpoints.
func (f *tokenFleet) startEngines(t *testing.T, n int) []kvroute.Endpoint {
	t.Helper()
	var eps []kvroute.Endpoint
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		srv, err := server.New(server.Config{Model: testModel, EnableScaleOut: true,
			Engine: simengine.Config{BlockSize: 16, NumGPUBlocks: 512, PrefillTokensPerSecond: 1e7, DecodeStep: time.Millisecond}}, server.Options{})
		require.NoError(t, err)
		ch := make(chan error, 1)
		go func() { ch <- srv.Serve(ln) }()
		f.engines, f.served = append(f.engines, srv), append(f.served, ch)
		eps = append(eps, kvroute.Endpoint{ID: ln.Addr().String()})
	}
	return eps
}

func (f *tokenFleet) close(t *testing.T) {
	f.client.CloseIdleConnections()
	require.NoError(t, f.gw.Shutdown(context.Background()))
	for i, e := range f.engines {
		require.NoError(t, e.Close())
		<-f.served[i]
	}
}

func (f *tokenFleet) post(t *testing.T, path string, body any) (*http.Response, string) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := f.client.Post(f.gw.URL()+path, "application/json", strings.NewReader(string(b)))
	require.NoError(t, err)
	out := readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, out)
	return resp, out
}

func (f *tokenFleet) tokenizations() (n uint64) {
	for _, e := range f.engines {
		n += e.Tokenizations()
	}
	return n
}

// With completions in Config.TokenizeOnce every completions prompt is
// tokenized exactly once (by the render the router routes with), and twice
// without it (render, then the engine again). Requests tokenize-once leaves
// alone still cost two: chat completions and echo; a prompt of token IDs
// costs none either way.
func TestTokenizeOnceTokenizesEachCompletionsPromptOnce(t *testing.T) {
	defer leakcheck.Check(t)()
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprint("on=", on), func(t *testing.T) {
			var proxy Config
			if on {
				proxy.TokenizeOnce = []render.API{render.APICompletions}
			}
			f := startTokenFleet(t, 2, proxy)
			defer f.close(t)
			const n = 6
			for i := range n {
				_, out := f.post(t, "/v1/completions", map[string]any{"model": testModel, "max_tokens": 2,
					"prompt": fmt.Sprintf("a shared system prompt, then request %d of the test", i)})
				require.Contains(t, out, `"text_completion"`)
			}
			_, out := f.post(t, "/v1/completions", map[string]any{"model": testModel, "max_tokens": 2,
				"prompt": []string{"first of two prompts", "second of two prompts"}})
			require.Contains(t, out, `"index":1`)
			want := uint64(2*n + 4)
			if on {
				want = n + 2
			}
			require.Equal(t, want, f.tokenizations(), "prompts tokenized by the engines, render included")

			before := f.tokenizations()
			f.post(t, "/v1/completions", map[string]any{"model": testModel, "max_tokens": 2, "prompt": "echo me", "echo": true})
			f.post(t, "/v1/chat/completions", map[string]any{"model": testModel, "max_tokens": 2,
				"messages": []map[string]any{{"role": "user", "content": "hello"}}})
			require.Equal(t, before+4, f.tokenizations(), "echo and chat are forwarded as text either way")
			before = f.tokenizations()
			f.post(t, "/v1/completions", map[string]any{"model": testModel, "max_tokens": 2, "prompt": []int{5, 6, 7, 8}})
			require.Equal(t, before, f.tokenizations(), "a token-ID prompt is tokenized by no one")
		})
	}
}

var volatileFields = regexp.MustCompile(`"(id|created)":("[^"]*"|[0-9]+)`)

// The client sees the same response with and without tokenize-once, JSON
// and streamed (ids and timestamps aside, which differ on every request).
func TestTokenizeOnceLeavesTheResponseUnchanged(t *testing.T) {
	defer leakcheck.Check(t)()
	bodies := []map[string]any{
		{"model": testModel, "max_tokens": 5, "prompt": "tell me something about prefix caches"},
		{"model": testModel, "max_tokens": 3, "prompt": []string{"one prompt", "and another one"}},
		{"model": testModel, "max_tokens": 4, "prompt": "stream this", "stream": true,
			"stream_options": map[string]any{"include_usage": true}},
	}
	answers := map[bool][]string{}
	for _, on := range []bool{false, true} {
		var proxy Config
		if on {
			proxy.TokenizeOnce = []render.API{render.APICompletions}
		}
		f := startTokenFleet(t, 1, proxy)
		for _, b := range bodies {
			resp, out := f.post(t, "/v1/completions", b)
			require.NotEmpty(t, resp.Header.Get(HeaderPromptTokens))
			answers[on] = append(answers[on], volatileFields.ReplaceAllString(out, `"$1":_`))
		}
		f.close(t)
	}
	require.Equal(t, answers[false], answers[true])
	require.Contains(t, answers[true][2], "data: [DONE]")
}

func TestTokenizeOnceRefusesAPIsWhoseResponseWouldChange(t *testing.T) {
	for _, a := range []render.API{render.APIChatCompletions, render.APIMessages, render.APIResponses, "bogus"} {
		_, err := New(Config{TokenizeOnce: []render.API{a}}, new(RoundRobin), Options{})
		require.ErrorContains(t, err, string(a))
	}
	h, err := New(Config{TokenizeOnce: []render.API{render.APICompletions}}, new(RoundRobin), Options{})
	require.NoError(t, err)
	h.Close()
}

func TestTokenBodyReplacesOnlyATextPrompt(t *testing.T) {
	p := func(ids ...uint32) render.Prompt { return render.Prompt{TokenIDs: ids} }
	for _, c := range []struct {
		body    string
		prompts []render.Prompt
		want    string // "" = left alone
	}{
		{`{"model":"m","prompt":"hi there","max_tokens":2}`, []render.Prompt{p(1, 2)}, `{"model":"m","prompt":[1,2],"max_tokens":2}`},
		{`{"prompt" : [ "a" , "b" ] }`, []render.Prompt{p(1), p(2, 3)}, `{"prompt" : [[1],[2,3]] }`},
		{`{"pr\u006fmpt":"x","echo":false}`, []render.Prompt{p(4294967295)}, `{"pr\u006fmpt":[4294967295],"echo":false}`},
		{`{"prompt":"x","prompt":"y"}`, []render.Prompt{p(9)}, `{"prompt":"x","prompt":[9]}`},
		{`{"prompt":"x","echo":true}`, []render.Prompt{p(1)}, ""},
		{`{"prompt":"x","prompt_embeds":"AAAA"}`, []render.Prompt{p(1)}, ""},
		{`{"prompt":[1,2]}`, []render.Prompt{p(1, 2)}, ""},
		{`{"prompt":["a","b"]}`, []render.Prompt{p(1)}, ""},
		{`{"prompt":"x"}`, []render.Prompt{{TokenIDs: []uint32{1}, Features: []render.MMFeature{{}}}}, ""},
		{`{"prompt":"x"}`, []render.Prompt{p()}, ""},
		{`{"model":"m"}`, []render.Prompt{p(1)}, ""},
		{`{}`, []render.Prompt{p(1)}, ""},
	} {
		got, ok := tokenBody([]byte(c.body), c.prompts)
		if c.want == "" {
			require.False(t, ok, c.body)
			continue
		}
		require.True(t, ok, c.body)
		require.Equal(t, c.want, string(got))
		require.True(t, json.Valid(got))
	}
}

// A token-in request to GeneratePath is routed by its own token IDs (the
// gateway renders nothing, the engine tokenizes nothing) and reaches the
// engine unchanged; vLLM's answer, token IDs, comes back as it was sent.
func TestGenerateIsRoutedByItsTokensWithoutRender(t *testing.T) {
	defer leakcheck.Check(t)()
	f := startTokenFleet(t, 2, Config{})
	defer f.close(t)
	ids := make([]int, 64)
	for i := range ids {
		ids[i] = 100 + i
	}
	body := map[string]any{"model": testModel, "token_ids": ids, "sampling_params": map[string]any{"max_tokens": 2}, "cache_salt": "s"}
	var first string
	for i := range 4 {
		resp, out := f.post(t, GeneratePath, body)
		require.Equal(t, "64", resp.Header.Get(HeaderPromptTokens))
		require.Contains(t, out, `"token_ids":[`)
		if i == 0 {
			first = resp.Header.Get(HeaderEndpoint)
		}
	}
	require.Zero(t, f.tokenizations(), "nothing rendered, nothing tokenized")
	require.NotEmpty(t, first)

	for _, bad := range []any{
		map[string]any{"model": testModel, "token_ids": []int{}, "sampling_params": map[string]any{}},
		map[string]any{"model": testModel, "token_ids": []int{1, 2}, "sampling_params": map[string]any{},
			"features": map[string]any{"mm_hashes": map[string]any{"image": []string{"h"}}, "mm_placeholders": map[string]any{"image": []any{}}}},
	} {
		b, _ := json.Marshal(bad)
		resp, err := f.client.Post(f.gw.URL()+GeneratePath, "application/json", strings.NewReader(string(b)))
		require.NoError(t, err)
		out := readAll(t, resp)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, out)
		require.Contains(t, out, "token-in generate request")
	}
}

func TestGeneratePromptReadsFeaturesInOrder(t *testing.T) {
	p, salt, err := generatePrompt([]byte(`{"token_ids":[1,2,3,4,5,6],"cache_salt":"x","features":{
		"mm_hashes":{"image":["b","a"],"audio":["c"]},
		"mm_placeholders":{"image":[{"offset":4,"length":2},{"offset":0,"length":1}],"audio":[{"offset":2,"length":1}]}}}`))
	require.NoError(t, err)
	require.Equal(t, "x", salt)
	require.Equal(t, []render.MMFeature{{Modality: "image", Hash: "a", Offset: 0, Length: 1},
		{Modality: "audio", Hash: "c", Offset: 2, Length: 1}, {Modality: "image", Hash: "b", Offset: 4, Length: 2}}, p.Features)
	_, _, err = generatePrompt([]byte(`{"token_ids":[1],"features":{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":0,"length":5}]}}}`))
	require.ErrorContains(t, err, "does not end within")
	_, _, err = generatePrompt([]byte(`{"token_ids":[1,2,3],"features":{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":2,"length":9223372036854775807}]}}}`))
	require.ErrorContains(t, err, "does not end within", "a length that wraps offset+length")
}

// Items are ordered by offset however the body's maps happen to be iterated:
// identical requests hash their items in one order and get the same block
// keys. Items cannot share an offset: their placeholders would overlap,
// which vLLM refuses.
func TestGeneratePromptOrderDoesNotDependOnMaps(t *testing.T) {
	body := []byte(`{"token_ids":[1,2,3,4,5,6],"features":{"mm_hashes":{"video":["v"],"audio":["a"],"image":["i","j"]},` +
		`"mm_placeholders":{"video":[{"offset":5,"length":1}],"audio":[{"offset":1,"length":2}],"image":[{"offset":3,"length":2},{"offset":0,"length":1}]}}}`)
	want := []render.MMFeature{{Modality: "image", Hash: "j", Offset: 0, Length: 1}, {Modality: "audio", Hash: "a", Offset: 1, Length: 2},
		{Modality: "image", Hash: "i", Offset: 3, Length: 2}, {Modality: "video", Hash: "v", Offset: 5, Length: 1}}
	for range 20 { // the maps' iteration order varies from call to call
		p, _, err := generatePrompt(body)
		require.NoError(t, err)
		require.Equal(t, want, p.Features)
	}
	_, _, err := generatePrompt([]byte(`{"token_ids":[1,2],"features":{"mm_hashes":{"audio":["a"],"image":["i"]},` +
		`"mm_placeholders":{"audio":[{"offset":0,"length":2}],"image":[{"offset":0,"length":1}]}}}`))
	require.ErrorContains(t, err, "placeholders overlap")
}

// The tokenize-once body is byte for byte the same whether its token IDs are
// the renderer's bytes copied (the render client keeps them when the
// renderer wrote them compact) or written afresh from the IDs (a renderer
// that spaces them, or prompts built by hand): what the engine receives does
// not depend on how the renderer formats its answer.
func TestTokenBodyIsTheSameFromTheRenderersBytes(t *testing.T) {
	defer leakcheck.Check(t)()
	ids := [][]uint32{{0, 7, 10, 99, 100, 65535, 151643, 4294967295}, {3, 1, 2}}
	answers := []string{
		`[{"request_id":"a","token_ids":[0,7,10,99,100,65535,151643,4294967295]},{"token_ids":[3,1,2]}]`,
		`[{"request_id":"a","token_ids":[0, 7, 10, 99, 100, 65535, 151643, 4294967295]},{"token_ids":[ 3,1,2 ]}]`,
	}
	var answer atomic.Int64
	renderer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(answers[answer.Load()]))
	}))
	defer renderer.Close()
	c, err := render.New(render.Config{URL: renderer.URL}, render.Options{})
	require.NoError(t, err)
	defer c.Close()
	body := []byte(`{"model":"m","prompt":["first","second"],"max_tokens":2}`)
	want, ok := tokenBody(body, []render.Prompt{{TokenIDs: ids[0]}, {TokenIDs: ids[1]}})
	require.True(t, ok)
	require.Equal(t, `{"model":"m","prompt":[[0,7,10,99,100,65535,151643,4294967295],[3,1,2]],"max_tokens":2}`, string(want))
	var res render.Result
	for i := range answers {
		answer.Store(int64(i))
		require.NoError(t, c.RenderInto(context.Background(), &render.Request{API: render.APICompletions, Body: body, Model: "m", KeepTokenJSON: true}, &res))
		require.Equal(t, ids[0], res.Prompts[0].TokenIDs)
		got, ok := tokenBody(body, res.Prompts)
		require.True(t, ok)
		require.Equal(t, string(want), string(got), answers[i])
	}
}

// A recycled array written into again holds exactly the new body: a shorter
// body after a longer one leaves none of the longer one's bytes, and an
// array too small is replaced.
func TestAppendTokenBodyIntoARecycledArray(t *testing.T) {
	long := []byte(`{"model":"m","prompt":"a much longer prompt than the next","max_tokens":2}`)
	short := []byte(`{"prompt":"x"}`)
	lp := []render.Prompt{{TokenIDs: []uint32{1, 22, 333, 4444, 55555, 666666, 7777777}}}
	sp := []render.Prompt{{TokenIDs: []uint32{9}}}
	want := func(body []byte, ps []render.Prompt) string {
		b, ok := tokenBody(body, ps)
		require.True(t, ok)
		return string(b)
	}
	dirty := []byte(strings.Repeat("#", 200))[:0]
	got, ok := appendTokenBody(dirty, long, lp)
	require.True(t, ok)
	require.Equal(t, want(long, lp), string(got))
	require.Same(t, &dirty[:1][0], &got[0], "written into the recycled array")
	got, ok = appendTokenBody(got[:0], short, sp)
	require.True(t, ok)
	require.Equal(t, `{"prompt":[9]}`, string(got))
	small := make([]byte, 0, 4)
	got, ok = appendTokenBody(small, long, lp)
	require.True(t, ok)
	require.Equal(t, want(long, lp), string(got))
	require.NotSame(t, &small[:1][0], &got[0])
	_, ok = appendTokenBody(dirty, []byte(`{"prompt":[1]}`), sp)
	require.False(t, ok)
}
