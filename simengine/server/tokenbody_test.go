package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// decodeBoth decodes body with decodeCompletion and with decodeJSON and
// returns what each produced: the request (with its prompts) or the error.
func decodeBoth(t testing.TB, body string, limit int64) (fast, slow string) {
	s := &Server{cfg: Config{MaxBodyBytes: limit}}
	one := func(dec func(*completionRequest, *httptest.ResponseRecorder, *http.Request) *apiError) string {
		r := httptest.NewRequest("POST", "/v1/completions", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		var req completionRequest
		if e := dec(&req, httptest.NewRecorder(), r); e != nil {
			b, _ := json.Marshal(map[string]any{"status": e.status, "type": e.typ, "message": e.message, "param": e.param})
			return "error " + string(b)
		}
		prompts, pe := req.prompts()
		if pe != nil {
			prompts = nil
		}
		b, err := json.Marshal(map[string]any{"model": req.Model, "prompt": string(req.Prompt), "max_tokens": req.MaxTokens, "n": req.N,
			"stream": req.Stream, "stream_options": req.StreamOptions, "cache_salt": req.CacheSalt, "kv": string(req.KVTransferParams),
			"prompts": prompts, "prompts_err": pe, "texts": req.texts})
		require.NoError(t, err)
		return string(b)
	}
	fast = one(func(req *completionRequest, w *httptest.ResponseRecorder, r *http.Request) *apiError {
		return s.decodeCompletion(w, r, req)
	})
	slow = one(func(req *completionRequest, w *httptest.ResponseRecorder, r *http.Request) *apiError {
		return s.decodeJSON(w, r, req)
	})
	return fast, slow
}

// decodeCompletion, which parses a token-ID prompt without encoding/json,
// decodes every body as decodeJSON does: the same fields, prompts and
// errors, whether it takes its fast path or not.
func TestDecodeCompletionMatchesDecodeJSON(t *testing.T) {
	for _, body := range completionBodies {
		fast, slow := decodeBoth(t, body, 1<<20)
		require.Equal(t, slow, fast, "%s", body)
	}
	// A body past the byte limit, with its value complete before it or not.
	for _, body := range []string{`{"prompt":[1,2,3]}      `, `{"prompt":[1,2,3,4,5,6,7]}`} {
		fast, slow := decodeBoth(t, body, 20)
		require.Equal(t, slow, fast, "%s", body)
	}
	fast, _ := decodeBoth(t, `{"model":"m","prompt":[5,6,7],"max_tokens":1}`, 1<<20)
	require.Contains(t, fast, `"prompts":[[5,6,7]]`)
}

// completionBodies are token-ID, text and malformed completions bodies; the
// fuzz test's seeds.
var completionBodies = []string{
	`{"model":"m","prompt":[1,2,3],"max_tokens":1}`,
	` { "prompt" : [ 1 , 2 , 4294967295 ] , "stream" : true , "stream_options":{"include_usage":true}} ` + "\n",
	`{"prompt":[1,2,3],"cache_salt":"s","kv_transfer_params":{"do_remote_decode":true},"n":1}`,
	`{"prompt":"hello world","max_tokens":2}`,
	`{"prompt":["a b","c"]}`,
	`{"prompt":[[1,2],[3]]}`,
	`{"prompt":[]}`,
	`{"prompt":[1,2,3]} x`,
	`{"prompt":[1,2,3]}{}`,
	`{"prompt":[1,2,3],"max_tokens":"x"}`,
	`{"prompt":[1,2,3],"max_tokens":1,}`,
	`{"prompt":[01,2]}`,
	`{"prompt":[1,2,4294967296]}`,
	`{"prompt":[-1]}`,
	`{"prompt":[1.5]}`,
	`{"prompt":[1,2],"prompt":"text"}`,
	`{"prompt":"text","prompt":[1,2]}`,
	`{"Prompt":[1,2]}`,
	`{"PROMPT":[1,2],"prompt":[3]}`,
	`{"prompt":[1,2],"PrOmPt":null}`,
	`{"pr\u006fmpt":[1,2]}`,
	`{"prompt":[1,2],"model":"\ud83d\ude00 \u00e9"}`,
	`{"prompt":[1,2],"model":"bad \x01"}`,
	`{"prompt":null}`,
	`{}`,
	`[1,2,3]`,
	`{"prompt":[1,2,3]`,
	`{"prompt":[1,2,3],"extra":{"a":[{"b":null}]}}`,
	``,
}

func FuzzDecodeCompletionMatchesDecodeJSON(f *testing.F) {
	for _, b := range completionBodies {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body string) {
		fast, slow := decodeBoth(t, body, 1<<20)
		if fast != slow {
			t.Fatalf("body %q:\nfast %s\nslow %s", body, fast, slow)
		}
	})
}

// The render routes' responses, written with token_ids spliced in, are
// byte for byte what json.Marshal writes, for one response and for the
// completions route's array, with strings that need escaping.
func TestMarshalRenderMatchesEncodingJSON(t *testing.T) {
	s := &Server{cfg: Config{Model: "m", DefaultMaxTokens: 16}}
	salt := `s"<&>\` + "\u2028"
	mt := 3
	gs := []generateRequest{
		s.generateRequest(`cmpl-"x"-0`, []uint32{0, 9, 10, 99999, 4294967295}, &mt, "m<b>", &salt, true, renderEcho{}),
		s.generateRequest("cmpl-x-1", []uint32{1}, nil, "", nil, false, renderEcho{}),
		s.generateRequest("cmpl-x-2", nil, nil, "", nil, false, renderEcho{}),
	}
	for i := range gs {
		want, err := json.Marshal(gs[i])
		require.NoError(t, err)
		got, err := marshalRender(gs[i:i+1], false)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
	}
	want, err := json.Marshal(gs)
	require.NoError(t, err)
	got, err := marshalRender(gs, true)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
	got, err = marshalRender(nil, true)
	require.NoError(t, err)
	require.Equal(t, "[]", string(got))
}
