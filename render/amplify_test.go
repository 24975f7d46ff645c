package render

import (
	"bytes"
	"context"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// allocated returns the bytes the heap allocated while fn ran.
func allocated(fn func()) uint64 {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	fn()
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc
}

// repeated writes open, then item n times separated by commas, then close,
// until the whole is at least size bytes.
func repeated(open, item, close string, size int) []byte {
	var b bytes.Buffer
	b.WriteString(open)
	for n := 0; b.Len() < size; n++ {
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item)
	}
	b.WriteString(close)
	return b.Bytes()
}

// answer makes s answer path with body.
func answer(s *fakeVLLM, path string, body []byte) {
	s.on(path, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
}

// A completions render of one prompt whose renderer answers 4 MiB of tiny
// prompts (within the response cap) is refused as a malformed answer, with
// reason decode, before those prompts are decoded: the Client accepted
// ~230k prompts for a request that has one and allocated ~34x the body
// doing so (~2 GB per render at the default 64 MiB cap). Reading the body
// into its buffer costs up to ~4x the body (the buffer doubles as it
// fills); the decoding now adds next to nothing.
func TestAnswerWithMorePromptsThanTheRequestIsRefused(t *testing.T) {
	body := repeated("[", `{"token_ids":[1]}`, "]", 4<<20)
	s := newFakeVLLM(t, "a")
	answer(s, "/v1/completions/render", body)
	c := newTestClient(t, func(cfg *Config) { cfg.Hedge = new(false) }, s)

	var err error
	alloc := allocated(func() { _, err = c.Render(context.Background(), completions("one prompt")) })
	var re *Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, ReasonDecode, re.Reason)
	require.ErrorContains(t, err, "more prompts than the request's 1")
	require.Equal(t, 1.0, testutil.ToFloat64(c.metrics.failures[ReasonDecode]), "counted as a malformed answer")
	t.Logf("body %d B, allocated %d B (%.1fx)", len(body), alloc, float64(alloc)/float64(len(body)))
	if !raceEnabled {
		require.Less(t, alloc, uint64(6*len(body)), "allocation amplification of a capped body")
	}
}

// A completions request of several prompts may get as many back, and no
// more: its prompt (a list of strings or of token-ID lists) and its
// prompt_embeds count, a single string or token-ID list being one prompt.
func TestCompletionsAnswerHoldsAtMostTheRequestsPrompts(t *testing.T) {
	s := newFakeVLLM(t, "a")
	c := newTestClient(t, func(cfg *Config) { cfg.Hedge = new(false) }, s)
	three := &Request{API: APICompletions, Body: []byte(`{"model":"qwen3-8b","prompt":["a","b","c"]}`)}
	res, err := c.Render(context.Background(), three)
	require.NoError(t, err)
	require.Len(t, res.Prompts, 3)

	prompt := generateRequest([]uint32{1, 2}, "", "")
	answer(s, "/v1/completions/render", []byte("["+strings.Repeat(prompt+",", 3)+prompt+"]"))
	_, err = c.Render(context.Background(), three)
	var re *Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, ReasonDecode, re.Reason)
	require.ErrorContains(t, err, "more prompts than the request's 3")

	for _, tc := range []struct {
		body    string
		prompts int // what the request counts for
	}{
		{`{"prompt":[[1,2],[3]],"prompt_embeds":["e1","e2"]}`, 4},
		{`{"prompt":["a","b","c","d"]}`, 4},
		{`{"prompt":[1,2,3,4,5]}`, 1},                    // one prompt's token IDs
		{`{"prompt":["a","b","c","d"],"prompt":"x"}`, 1}, // the last duplicate counts
		{`{"prompt":null,"prompt_embeds":"e1"}`, 1},
	} {
		_, err := c.Render(context.Background(), &Request{API: APICompletions, Body: []byte(tc.body)})
		if tc.prompts == 4 {
			require.NoError(t, err, tc.body)
		} else {
			require.ErrorContains(t, err, "more prompts than the request's 1", tc.body)
		}
	}
}

// A chat answer of a few tokens whose features list 4 MiB of mm_hashes is
// refused as soon as its hashes outnumber its placeholders (a valid answer
// has one hash per placeholder, and no more placeholders than tokens),
// before they are decoded: every hash, 3 bytes of JSON, cost a string header
// of 16 bytes and the list's growth. Features are decoded once the token
// count is known, also when they come before token_ids.
func TestMultimodalItemsBeyondThePromptAreRefused(t *testing.T) {
	hashes := repeated(`{"features":{"mm_hashes":{"image":[`, `""`, `]},"mm_placeholders":{"image":[{"offset":0,"length":1}]}},"token_ids":[1,2]}`, 4<<20)
	places := repeated(`{"token_ids":[1,2],"features":{"mm_hashes":{"image":["h"]},"mm_placeholders":{"image":[`, `{"offset":0,"length":1}`, `]}}}`, 1<<20)
	s := newFakeVLLM(t, "a")
	c := newTestClient(t, func(cfg *Config) { cfg.Hedge = new(false) }, s)
	for _, tc := range []struct {
		body []byte
		want string
	}{
		{hashes, "mm_hashes: more items than the 1 placeholders"},
		{places, "mm_placeholders: more items than the 2 tokens of the prompt"},
	} {
		answer(s, "/v1/chat/completions/render", tc.body)
		var err error
		alloc := allocated(func() { _, err = c.Render(context.Background(), chat("hi")) })
		var re *Error
		require.ErrorAs(t, err, &re)
		require.Equal(t, ReasonDecode, re.Reason)
		require.ErrorContains(t, err, tc.want)
		t.Logf("body %d B, allocated %d B (%.1fx)", len(tc.body), alloc, float64(alloc)/float64(len(tc.body)))
		if !raceEnabled {
			require.Less(t, alloc, uint64(6*len(tc.body)), "allocation amplification of a capped body")
		}
	}
	require.Equal(t, 2.0, testutil.ToFloat64(c.metrics.failures[ReasonDecode]))

	// The same items within bounds, features first, decode.
	answer(s, "/v1/chat/completions/render", []byte(`{"features":{"mm_placeholders":{"image":[{"offset":1,"length":1}]},"mm_hashes":{"image":["h"]}},"token_ids":[7,8,9]}`))
	res, err := c.Render(context.Background(), chat("hi"))
	require.NoError(t, err)
	require.Equal(t, []MMFeature{{Modality: "image", Hash: "h", Offset: 1, Length: 1}}, res.Prompts[0].Features)
}

// Decoding a refused answer allocates next to nothing: the limits apply
// before the items are built.
func TestDecodingARefusedFloodAllocatesLittle(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	for name, tc := range map[string]struct {
		body  []byte
		array bool
	}{
		"prompts": {repeated("[", `{"token_ids":[1]}`, "]", 4<<20), true},
		"hashes":  {repeated(`{"token_ids":[1,2],"features":{"mm_hashes":{"image":[`, `""`, `]},"mm_placeholders":{}}}`, 4<<20), false},
	} {
		var res Result
		var err error
		alloc := allocated(func() { err = decodeResponse(tc.body, tc.array, 1, false, &res) })
		require.ErrorIs(t, err, errDecode, name)
		require.Less(t, alloc, uint64(len(tc.body)/64), "%s: allocated %d B decoding a %d B body", name, alloc, len(tc.body))
	}
}
