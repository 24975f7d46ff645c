package server

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/simengine"
)

type pdAnswer struct {
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		Details      struct {
			Cached int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	KV *kvTransferParams `json:"kv_transfer_params"`
}

var longText = strings.Repeat("the quick brown fox jumps over the lazy dog ", 20)

func prefillBody(text string) map[string]any {
	b := chatBody(text, 1)
	b["stream"] = false
	b["kv_transfer_params"] = map[string]any{"do_remote_decode": true, "do_remote_prefill": false,
		"remote_engine_id": nil, "remote_block_ids": nil, "remote_host": nil, "remote_port": nil}
	return b
}

func decodeBody(text string, kv *kvTransferParams) map[string]any {
	b := chatBody(text, 8)
	b["kv_transfer_params"] = kv
	return b
}

// doPrefill runs the prefill half on a prefiller and returns its params.
func doPrefill(t *testing.T, url, text string) *kvTransferParams {
	t.Helper()
	code, b := post(t, url+"/v1/chat/completions", prefillBody(text))
	require.Equal(t, http.StatusOK, code, string(b))
	a := decode[pdAnswer](t, b)
	require.NotNil(t, a.KV, string(b))
	return a.KV
}

// The two halves over real HTTP: the prefiller answers one token and
// transfer parameters naming itself; the decoder reads the blocks from it,
// reports them in a BlockStored (GPU) with the hashes the prefiller named,
// counts the whole prompt as cached, and generates.
func TestPDPrefillThenDecodeOverHTTP(t *testing.T) {
	pre, preURL := startServer(t, Config{PD: PDConfig{Role: RolePrefill, EngineID: "p0"}})
	rec := newRecorder()
	eng := fastEngine()
	eng.Sink = rec
	dec, decURL := startServer(t, Config{Engine: eng, PD: PDConfig{Role: RoleDecode, TransferTimePerToken: time.Microsecond}})

	kv := doPrefill(t, preURL, longText)
	require.True(t, kv.DoRemotePrefill)
	require.False(t, kv.DoRemoteDecode)
	require.Equal(t, "p0", kv.RemoteEngineID)
	require.Equal(t, "127.0.0.1", kv.RemoteHost)
	require.Equal(t, pre.Addr(), "127.0.0.1:"+itoa(kv.RemotePort))
	require.NotEmpty(t, kv.RemoteBlockIDs)
	require.NotEmpty(t, kv.RemoteRequestID)
	require.Equal(t, 1.0, testutil.ToFloat64(pre.pd.leases.held))

	code, b := post(t, decURL+"/v1/chat/completions", decodeBody(longText, kv))
	require.Equal(t, http.StatusOK, code, string(b))
	a := decode[pdAnswer](t, b)
	require.Nil(t, a.KV, "a decoder's answer carries no transfer params")
	require.Equal(t, a.Usage.PromptTokens-1, a.Usage.Details.Cached, "the whole prompt arrived; vLLM computes the last token")
	require.Equal(t, 1.0, testutil.ToFloat64(dec.pd.transfers.WithLabelValues("ok")))
	require.Equal(t, float64(a.Usage.PromptTokens), testutil.ToFloat64(dec.pd.received))
	require.Equal(t, uint64(a.Usage.PromptTokens-1), dec.Engine().Stats().KVTransferTokens)
	require.Equal(t, 0.0, testutil.ToFloat64(pre.pd.leases.held), "the read consumed the lease")

	ev := rec.drain()
	require.NotEmpty(t, ev)
	require.Equal(t, simengine.BlockStored, ev[0].Type)
	require.Equal(t, simengine.MediumGPU, ev[0].Medium)
	require.Equal(t, kv.RemoteBlockIDs, ev[0].BlockHashes, "the decoder publishes the received blocks")

	// The same parameters again: the prefiller no longer has the lease; the
	// decoder recomputes (here: finds its own copy) and still answers.
	code, b = post(t, decURL+"/v1/chat/completions", decodeBody(longText, kv))
	require.Equal(t, http.StatusOK, code, string(b))
	require.Equal(t, 1.0, testutil.ToFloat64(dec.pd.failures.WithLabelValues(failExpired)))
	require.Equal(t, 1.0, testutil.ToFloat64(dec.pd.transfers.WithLabelValues("recompute")))
}

// The Responses API carries kv_transfer_params as vLLM's does
// (ResponsesRequest and ResponsesResponse, vllm-project/vllm#37424): a
// prefill request on /v1/responses asking for one token with
// max_output_tokens is answered with transfer parameters, and the decode
// request reads the blocks they name. Before, /v1/responses ignored them:
// the prefiller answered none and the decoder computed the whole prompt.
func TestPDResponsesAPI(t *testing.T) {
	pre, preURL := startServer(t, Config{PD: PDConfig{Role: RolePrefill, EngineID: "p0"}})
	dec, decURL := startServer(t, Config{PD: PDConfig{Role: RoleDecode, TransferTimePerToken: time.Microsecond}})
	type respAnswer struct {
		Status string `json:"status"`
		Usage  struct {
			Input   int `json:"input_tokens"`
			Output  int `json:"output_tokens"`
			Details struct {
				Cached int `json:"cached_tokens"`
			} `json:"input_tokens_details"`
		} `json:"usage"`
		KV *kvTransferParams `json:"kv_transfer_params"`
	}
	code, b := post(t, preURL+"/v1/responses", map[string]any{"model": "m", "input": longText, "max_output_tokens": 1,
		"stream": false, "store": false, "kv_transfer_params": map[string]any{"do_remote_decode": true, "do_remote_prefill": false}})
	require.Equal(t, http.StatusOK, code, string(b))
	p := decode[respAnswer](t, b)
	require.Equal(t, 1, p.Usage.Output)
	require.NotNil(t, p.KV, string(b))
	require.True(t, p.KV.DoRemotePrefill)
	require.Equal(t, "p0", p.KV.RemoteEngineID)
	require.Equal(t, 1.0, testutil.ToFloat64(pre.pd.leases.held))

	code, b = post(t, decURL+"/v1/responses", map[string]any{"model": "m", "input": longText, "max_output_tokens": 6, "kv_transfer_params": p.KV})
	require.Equal(t, http.StatusOK, code, string(b))
	d := decode[respAnswer](t, b)
	require.Nil(t, d.KV, "a decoder's answer carries no transfer params")
	require.Equal(t, 6, d.Usage.Output)
	require.Equal(t, d.Usage.Input-1, d.Usage.Details.Cached, "the whole prompt arrived")
	require.Equal(t, 1.0, testutil.ToFloat64(dec.pd.transfers.WithLabelValues("ok")))
	require.Equal(t, 0.0, testutil.ToFloat64(pre.pd.leases.held), "the read consumed the lease")
}

// The Messages API carries kv_transfer_params as vLLM's does
// (AnthropicMessagesRequest reads them into the chat completion it serves
// the message as; AnthropicMessagesResponse answers them): a prefill
// request on /v1/messages asking for one token with max_tokens is answered
// with transfer parameters, and the decode request reads the blocks they
// name, streamed or not. A bad kv_transfer_params is a 400 in the request
// model's validation shape; a failed read under the "fail" policy is the
// handler's 500, in Anthropic's error shape. Before, /v1/messages ignored
// them: the prefiller answered none and the decoder computed the whole
// prompt.
func TestPDMessagesAPI(t *testing.T) {
	pre, preURL := startServer(t, Config{PD: PDConfig{Role: RolePrefill, EngineID: "p0"}})
	dec, decURL := startServer(t, Config{PD: PDConfig{Role: RoleDecode, TransferTimePerToken: time.Microsecond}})
	type msgAnswer struct {
		Type       string `json:"type"`
		StopReason string `json:"stop_reason"`
		Usage      struct {
			Input  int `json:"input_tokens"`
			Output int `json:"output_tokens"`
		} `json:"usage"`
		KV *kvTransferParams `json:"kv_transfer_params"`
	}
	msgs := []map[string]any{{"role": "user", "content": longText}}
	prefill := func(t *testing.T) *kvTransferParams {
		t.Helper()
		code, b := post(t, preURL+"/v1/messages", map[string]any{"model": "m", "messages": msgs, "max_tokens": 1,
			"stream": false, "kv_transfer_params": map[string]any{"do_remote_decode": true, "do_remote_prefill": false}})
		require.Equal(t, http.StatusOK, code, string(b))
		p := decode[msgAnswer](t, b)
		require.Equal(t, "message", p.Type)
		require.Equal(t, 1, p.Usage.Output)
		require.NotNil(t, p.KV, string(b))
		require.True(t, p.KV.DoRemotePrefill)
		require.Equal(t, "p0", p.KV.RemoteEngineID)
		require.Equal(t, 1.0, testutil.ToFloat64(pre.pd.leases.held))
		return p.KV
	}

	kv := prefill(t)
	code, b := post(t, decURL+"/v1/messages", map[string]any{"model": "m", "messages": msgs, "max_tokens": 6, "kv_transfer_params": kv})
	require.Equal(t, http.StatusOK, code, string(b))
	d := decode[msgAnswer](t, b)
	require.Nil(t, d.KV, "a decoder's answer carries no transfer params")
	require.NotContains(t, string(b), "kv_transfer_params")
	require.Equal(t, 6, d.Usage.Output)
	require.Equal(t, 1.0, testutil.ToFloat64(dec.pd.transfers.WithLabelValues("ok")))
	require.Equal(t, uint64(d.Usage.Input-1), dec.Engine().Stats().KVTransferTokens, "the whole prompt arrived")
	require.Equal(t, 0.0, testutil.ToFloat64(pre.pd.leases.held), "the read consumed the lease")

	// Streamed: the decode half reads the blocks too.
	kv = prefill(t)
	code, b = post(t, decURL+"/v1/messages", map[string]any{"model": "m", "messages": msgs, "max_tokens": 3, "stream": true, "kv_transfer_params": kv})
	require.Equal(t, http.StatusOK, code, string(b))
	require.Equal(t, 3, strings.Count(string(b), "event: content_block_delta"), string(b))
	require.Equal(t, 2.0, testutil.ToFloat64(dec.pd.transfers.WithLabelValues("ok")))
	require.Equal(t, 0.0, testutil.ToFloat64(pre.pd.leases.held))

	// Not an object: the request model's validation, vLLM's ErrorResponse.
	code, b = post(t, preURL+"/v1/messages", map[string]any{"model": "m", "messages": msgs, "max_tokens": 1, "kv_transfer_params": "x"})
	require.Equal(t, http.StatusBadRequest, code, string(b))
	require.Contains(t, string(b), "kv_transfer_params")

	// A read that fails under the fail policy: the handler's error, in
	// Anthropic's shape.
	_, failURL := startServer(t, Config{PD: PDConfig{Role: RoleDecode, KVLoadFailurePolicy: PolicyFail}})
	code, b = post(t, failURL+"/v1/messages", map[string]any{"model": "m", "messages": msgs, "max_tokens": 2, "kv_transfer_params": kv})
	require.Equal(t, http.StatusInternalServerError, code, string(b))
	var e anthropicErrorBody
	require.NoError(t, json.Unmarshal(b, &e), string(b))
	require.Equal(t, "error", e.Type, string(b))
	require.Contains(t, e.Error.Message, "kv_load_failure_policy")
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// shortReader is a fake prefiller whose read route returns only tokens
// prompt tokens (the rest of its blocks lost), and its params for a request.
func shortReader(t *testing.T, tokens int) *kvTransferParams {
	t.Helper()
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		writeJSON(w, http.StatusOK, readResponse{Tokens: tokens, Blocks: tokens / 4})
	}))
	t.Cleanup(fake.Close)
	host, port, err := net.SplitHostPort(strings.TrimPrefix(fake.URL, "http://"))
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	return &kvTransferParams{DoRemotePrefill: true, RemoteHost: host, RemotePort: p, RemoteRequestID: "r"}
}

// Failed reads: blocks lost on the prefiller (a short read), the prefiller
// gone (unreachable), parameters without an address. Under "recompute"
// the request completes with the missing tokens computed locally; under
// "fail" it is a 500. Each is counted by reason.
func TestPDTransferFailuresRecomputeOrFail(t *testing.T) {
	pre, preURL := startServer(t, Config{PD: PDConfig{Role: RolePrefill}})
	dec, decURL := startServer(t, Config{PD: PDConfig{Role: RoleDecode}})
	strict, strictURL := startServer(t, Config{PD: PDConfig{Role: RoleDecode, KVLoadFailurePolicy: PolicyFail}})

	// Evicted: only the first 8 tokens' blocks came back; the rest is
	// computed here.
	code, b := post(t, decURL+"/v1/chat/completions", decodeBody(longText, shortReader(t, 8)))
	require.Equal(t, http.StatusOK, code, string(b))
	a := decode[pdAnswer](t, b)
	require.Equal(t, 8, a.Usage.Details.Cached, "what arrived counts; the rest was computed")
	require.Equal(t, 1.0, testutil.ToFloat64(dec.pd.failures.WithLabelValues(failEvicted)))

	// Bad parameters: no address.
	code, b = post(t, decURL+"/v1/chat/completions", decodeBody("another prompt", &kvTransferParams{DoRemotePrefill: true}))
	require.Equal(t, http.StatusOK, code, string(b))
	require.Equal(t, 1.0, testutil.ToFloat64(dec.pd.failures.WithLabelValues(failBadParams)))

	// Policy fail: a 500, counted.
	code, b = post(t, strictURL+"/v1/chat/completions", decodeBody("a third prompt for the strict decoder", shortReader(t, 0)))
	require.Equal(t, http.StatusInternalServerError, code, string(b))
	require.Contains(t, string(b), "kv_load_failure_policy")
	require.Equal(t, 1.0, testutil.ToFloat64(strict.pd.transfers.WithLabelValues("fail")))

	// Unreachable: the prefiller is gone.
	kv := doPrefill(t, preURL, "a fourth prompt")
	require.NoError(t, pre.Close())
	code, b = post(t, decURL+"/v1/chat/completions", decodeBody("a fourth prompt", kv))
	require.Equal(t, http.StatusOK, code, string(b))
	require.Equal(t, 1.0, testutil.ToFloat64(dec.pd.failures.WithLabelValues(failUnreachable)))
	require.Equal(t, 3.0, testutil.ToFloat64(dec.pd.transfers.WithLabelValues("recompute")))
}

// A prefiller holds a produced request's blocks in use until the decoder
// reads them (then they are free and still cached), or until the lease is
// dropped; a prefix-cache reset fails meanwhile, as on vLLM.
func TestPDPrefillerHoldsBlocksUntilRead(t *testing.T) {
	pre, preURL := startServer(t, Config{PD: PDConfig{Role: RolePrefill}})
	_, decURL := startServer(t, Config{PD: PDConfig{Role: RoleDecode}})
	kv := doPrefill(t, preURL, longText)
	st := pre.Engine().Stats()
	require.Equal(t, 1, st.HeldRequests)
	require.GreaterOrEqual(t, st.HeldBlocks, len(kv.RemoteBlockIDs))
	code, _ := post(t, preURL+"/reset_prefix_cache", map[string]any{})
	require.NotEqual(t, http.StatusOK, code, "held blocks are in use")

	code, b := post(t, decURL+"/v1/chat/completions", decodeBody(longText, kv))
	require.Equal(t, http.StatusOK, code, string(b))
	st = pre.Engine().Stats()
	require.Equal(t, 0, st.HeldRequests)
	require.Equal(t, st.NumBlocks, st.FreeBlocks)
	require.GreaterOrEqual(t, st.CachedBlocks, len(kv.RemoteBlockIDs), "freed, still cached")
}

// A prefiller's leases expire after LeaseTTL and are bounded by MaxLeases;
// both drops are counted. The clock is the table's, moved by hand.
func TestPDLeasesExpireAndAreBounded(t *testing.T) {
	pre, preURL := startServer(t, Config{PD: PDConfig{Role: RolePrefill, LeaseTTL: time.Minute, MaxLeases: 2}})
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	pre.pd.leases.mu.Lock()
	pre.pd.leases.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	pre.pd.leases.mu.Unlock()

	k1 := doPrefill(t, preURL, "one")
	doPrefill(t, preURL, "two")
	doPrefill(t, preURL, "three") // drops "one"
	require.Equal(t, 1.0, testutil.ToFloat64(pre.pd.leases.dropped.WithLabelValues("capacity")))
	require.Equal(t, 2, pre.Engine().Stats().HeldRequests, "a dropped lease frees its blocks")
	code, _ := post(t, preURL+KVTransferReadPath, readRequest{RequestID: k1.RemoteRequestID})
	require.Equal(t, http.StatusNotFound, code)

	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	k4 := doPrefill(t, preURL, "four") // expires "two" and "three"
	require.Equal(t, 2.0, testutil.ToFloat64(pre.pd.leases.dropped.WithLabelValues("expired")))
	require.Equal(t, 1, pre.Engine().Stats().HeldRequests)
	code, b := post(t, preURL+KVTransferReadPath, readRequest{RequestID: k4.RemoteRequestID, EngineID: k4.RemoteEngineID})
	require.Equal(t, http.StatusOK, code, string(b))
	rr := decode[readResponse](t, b)
	require.Equal(t, len(k4.RemoteBlockIDs), rr.Blocks)
	require.Equal(t, 0.0, testutil.ToFloat64(pre.pd.leases.held))
	require.Equal(t, 0, pre.Engine().Stats().HeldRequests)
}

// A "both" engine has no KV connector: it ignores kv_transfer_params,
// serves no read route and exports no transfer metrics; bad parameters on a
// P/D engine are a 400 naming the field.
func TestPDBothRoleIgnoresParamsAndBadParamsAre400(t *testing.T) {
	both, bothURL := startServer(t, Config{})
	code, b := post(t, bothURL+"/v1/chat/completions", prefillBody(longText))
	require.Equal(t, http.StatusOK, code, string(b))
	require.Nil(t, decode[pdAnswer](t, b).KV)
	code, _ = post(t, bothURL+KVTransferReadPath, readRequest{RequestID: "x"})
	require.Equal(t, http.StatusNotFound, code)
	mfs, err := both.Registry().Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		require.NotContains(t, mf.GetName(), "kv_transfer")
	}

	_, preURL := startServer(t, Config{PD: PDConfig{Role: RolePrefill}})
	body := chatBody("x", 1)
	body["kv_transfer_params"] = "not an object"
	code, b = post(t, preURL+"/v1/chat/completions", body)
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, string(b), "kv_transfer_params")
	// A completion with two prompts cannot be split.
	code, b = post(t, preURL+"/v1/completions", map[string]any{"model": "m", "prompt": []string{"a", "b"}, "max_tokens": 1,
		"kv_transfer_params": map[string]any{"do_remote_decode": true}})
	require.Equal(t, http.StatusBadRequest, code, string(b))

	_, err = New(Config{Model: "m", PD: PDConfig{Role: "router"}}, Options{})
	require.ErrorContains(t, err, "role")
	_, err = New(Config{Model: "m", PD: PDConfig{Role: RoleDecode, KVLoadFailurePolicy: "retry"}}, Options{})
	require.ErrorContains(t, err, "kvLoadFailurePolicy")
}

// While a decoder reads its KV the request is counted as waiting, reason
// "deferred", as vLLM counts WAITING_FOR_REMOTE_KVS; then it runs.
func TestPDReadInFlightCountsAsDeferredWaiting(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		close(entered)
		<-release
		writeJSON(w, http.StatusOK, readResponse{Tokens: 0})
	}))
	defer fake.Close()
	dec, decURL := startServer(t, Config{PD: PDConfig{Role: RoleDecode}})
	host, port, err := net.SplitHostPort(strings.TrimPrefix(fake.URL, "http://"))
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	kv := &kvTransferParams{DoRemotePrefill: true, RemoteHost: host, RemotePort: p, RemoteRequestID: "r1"}

	body, err := json.Marshal(decodeBody("waiting for blocks", kv))
	require.NoError(t, err)
	done := make(chan int, 1)
	go func() { // no require here: not the test's goroutine
		resp, err := testClient.Post(decURL+"/v1/chat/completions", "application/json", strings.NewReader(string(body)))
		if err != nil {
			done <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		done <- resp.StatusCode
	}()
	<-entered
	require.Equal(t, 1, dec.Engine().Stats().Deferred)
	_, metrics := get(t, decURL+"/metrics")
	require.Contains(t, string(metrics), `vllm:num_requests_waiting_by_reason{engine="0",model_name="m",reason="deferred"} 1`)
	close(release)
	require.Equal(t, http.StatusOK, <-done)
	require.Equal(t, 0, dec.Engine().Stats().Deferred)
}

// A Messages request forcing a named tool (tool_choice {"type":"tool"}) is
// answered 500 when its generation ends at max_tokens, as vLLM answers it:
// it serves the message as a named-tool chat completion, whose arguments
// are the generated text, and decodes them with an unguarded json.loads
// to build the tool_use block, which a cut-off generation (one token, a
// prefill's) fails. A prefiller's blocks stay leased, as vLLM's engine
// keeps them for the decoder the lost answer named. Other tool choices
// ("any": vLLM's "required", parsed leniently) are answered as before.
func TestMessagesNamedToolCutOffIsServerError(t *testing.T) {
	pre, preURL := startServer(t, Config{PD: PDConfig{Role: RolePrefill, EngineID: "p0"}})
	msgs := []map[string]any{{"role": "user", "content": longText}}
	tools := []map[string]any{{"name": "get", "input_schema": map[string]any{"type": "object"}}}
	body := func(choice map[string]any) map[string]any {
		return map[string]any{"model": "m", "messages": msgs, "max_tokens": 1, "stream": false, "tools": tools, "tool_choice": choice,
			"kv_transfer_params": map[string]any{"do_remote_decode": true, "do_remote_prefill": false}}
	}
	code, b := post(t, preURL+"/v1/messages", body(map[string]any{"type": "tool", "name": "get"}))
	require.Equal(t, http.StatusInternalServerError, code, string(b))
	var e anthropicErrorBody
	require.NoError(t, json.Unmarshal(b, &e), string(b))
	require.Equal(t, "error", e.Type, string(b))
	require.Equal(t, "internal_error", e.Error.Type, string(b))
	require.Equal(t, 1.0, testutil.ToFloat64(pre.pd.leases.held), "the engine ran it: its blocks wait for a decoder")

	for _, choice := range []map[string]any{{"type": "any"}, {"type": "auto"}, {"type": "none"}} {
		code, b = post(t, preURL+"/v1/messages", body(choice))
		require.Equal(t, http.StatusOK, code, string(b))
		require.Contains(t, string(b), "kv_transfer_params", choice)
	}
	// Streamed, vLLM sends the arguments as partial JSON deltas: no decode.
	b2 := body(map[string]any{"type": "tool", "name": "get"})
	b2["stream"], b2["max_tokens"] = true, 3
	delete(b2, "kv_transfer_params")
	code, b = post(t, preURL+"/v1/messages", b2)
	require.Equal(t, http.StatusOK, code, string(b))
}
