package sidecar

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/testport"
	"github.com/kvroute/kvroute/simengine/server"
	"github.com/kvroute/kvroute/telemetry"
)

// Two prefillers and one decoder, all simulated engines over loopback HTTP,
// behind the sidecar: a request naming prefiller A is prefilled there and
// decoded here with the whole prompt received; a streamed one naming B
// streams through unchanged; one naming nobody is proxied as is.
func TestSidecarSplitsAcrossTwoPrefillersOverHTTP(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after every other cleanup
	preA, preB := startEngine(t, server.RolePrefill), startEngine(t, server.RolePrefill)
	dec := startEngine(t, server.RoleDecode)
	_, reg, url := startSidecar(t, Config{DecoderURL: "http://" + dec.Addr()})

	code, _, b := send(t, url+"/v1/chat/completions", preA.Addr(), chat(longPrompt+"first", 6, false))
	require.Equal(t, http.StatusOK, code, string(b))
	var a answer
	require.NoError(t, json.Unmarshal(b, &a))
	require.Equal(t, a.Usage.PromptTokens-1, a.Usage.Details.Cached, "the decoder received the whole prompt")
	require.NotContains(t, string(b), "kv_transfer_params", "the client sees the decoder's answer")
	require.Equal(t, uint64(1), preA.Engine().Stats().RequestSuccess)
	require.Equal(t, uint64(1), preA.Engine().Stats().GenerationTokens, "the prefiller generated one token")
	require.Equal(t, uint64(0), preB.Engine().Stats().RequestSuccess)

	code, hdr, b := send(t, url+"/v1/chat/completions", preB.Addr(), chat(longPrompt+"second", 5, true))
	require.Equal(t, http.StatusOK, code, string(b))
	require.Contains(t, hdr.Get("Content-Type"), "text/event-stream")
	require.True(t, strings.HasSuffix(string(b), "data: [DONE]\n\n"), string(b))
	require.Equal(t, 5+1, strings.Count(string(b), `"delta"`), "role chunk and five tokens")
	require.Equal(t, uint64(1), preB.Engine().Stats().RequestSuccess)

	transferred := dec.Engine().Stats().KVTransferTokens
	require.Greater(t, transferred, uint64(a.Usage.PromptTokens))
	code, _, b = send(t, url+"/v1/chat/completions", "", chat("no prefiller", 3, false))
	require.Equal(t, http.StatusOK, code, string(b))
	require.Equal(t, transferred, dec.Engine().Stats().KVTransferTokens, "a plain request transfers nothing")

	require.Equal(t, 2.0, counter(t, reg, "kvroute_sidecar_requests_total", "outcome", OutcomeSplit))
	require.Equal(t, 1.0, counter(t, reg, "kvroute_sidecar_requests_total", "outcome", OutcomePlain))
	require.Equal(t, 0.0, counter(t, reg, "kvroute_sidecar_requests_total", "outcome", OutcomeFallback))
}

// fakePrefiller answers with h; its address is host:port.
func fakePrefiller(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// freeAddr returns a loopback address nobody listens on. Its port lies
// outside the ephemeral range (testport): no other socket's bind to port 0
// takes it and answers, and a dial to it cannot connect to itself.
func freeAddr(t *testing.T) string {
	t.Helper()
	return testport.Addr(t)
}

// Every way the prefill step can fail falls back to a local prefill on the
// decoder: the client still gets the decoder's full answer (with nothing
// received by transfer), and the fallback is counted under its reason.
func TestSidecarFallsBackToLocalPrefillByReason(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after every other cleanup
	dec := startEngine(t, server.RoleDecode)
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	slow := fakePrefiller(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so the server notices the client hanging up
		select {                           // answers only after the sidecar gave up (or the test ended)
		case <-r.Context().Done():
		case <-release:
		}
	})
	failing := fakePrefiller(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"engine dead"}}`, http.StatusInternalServerError)
	})
	noParams := fakePrefiller(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"x","choices":[{"text":"a"}],"kv_transfer_params":null}`))
	})
	plainEngine := startEngine(t, server.RoleBoth) // no KV connector: no params
	// Only the hung prefiller is to reach the prefill timeout. The others
	// answer at once, but through a sidecar with a 200 ms timeout a loaded
	// machine could still make one of them late and count it as "timeout",
	// so they go through a sidecar whose timeout nothing here reaches.
	_, reg, url := startSidecar(t, Config{DecoderURL: "http://" + dec.Addr(), PrefillTimeout: time.Minute})
	_, slowReg, slowURL := startSidecar(t, Config{DecoderURL: "http://" + dec.Addr(), PrefillTimeout: 200 * time.Millisecond})

	cases := []struct{ target, reason, url string }{
		{freeAddr(t), ReasonUnreachable, url},
		{slow, ReasonTimeout, slowURL},
		{failing, ReasonStatus, url},
		{noParams, ReasonBadResponse, url},
		{plainEngine.Addr(), ReasonBadResponse, url},
		{"http://127.0.0.1:1/path", ReasonBadTarget, url},
		{"no-port", ReasonBadTarget, url},
	}
	for i, c := range cases {
		code, _, b := send(t, c.url+"/v1/chat/completions", c.target, chat(strings.Repeat("w", i+1)+" "+longPrompt, 3, false))
		require.Equal(t, http.StatusOK, code, "%s: %s", c.target, b)
		var a answer
		require.NoError(t, json.Unmarshal(b, &a))
		require.Less(t, a.Usage.Details.Cached, a.Usage.PromptTokens/2, "%s: prefilled locally", c.target)
	}
	once.Do(func() { close(release) })
	require.Equal(t, uint64(0), dec.Engine().Stats().KVTransferTokens)
	want := map[string]float64{ReasonUnreachable: 1, ReasonTimeout: 1, ReasonStatus: 1, ReasonBadResponse: 2, ReasonBadTarget: 2}
	both := func(name, label, value string) float64 {
		return counter(t, reg, name, label, value) + counter(t, slowReg, name, label, value)
	}
	for _, r := range Reasons {
		require.Equal(t, want[r], both("kvroute_sidecar_prefill_fallbacks_total", "reason", r), r)
	}
	require.Equal(t, 1.0, counter(t, slowReg, "kvroute_sidecar_prefill_fallbacks_total", "reason", ReasonTimeout))
	require.Equal(t, float64(len(cases)), both("kvroute_sidecar_requests_total", "outcome", OutcomeFallback))
}

// What each side receives: the prefiller gets max_tokens 1, stream false,
// no stream_options and do_remote_decode; the decoder gets the client's own
// fields back with the prefiller's kv_transfer_params verbatim (fields the
// sidecar does not know included); both carry one X-Request-Id; the P/D
// header reaches neither.
func TestSidecarBodiesAndHeaders(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after every other cleanup
	type seen struct {
		body map[string]any
		hdr  http.Header
	}
	var mu sync.Mutex
	var pre, dec seen
	prefiller := fakePrefiller(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		pre.hdr = r.Header.Clone()
		require.NoError(t, json.NewDecoder(r.Body).Decode(&pre.body))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"p","kv_transfer_params":{"do_remote_prefill":true,"do_remote_decode":false,"remote_engine_id":"e1","remote_block_ids":[1,2,3],"remote_host":"10.0.0.1","remote_port":5600,"tp_size":2,"future_field":{"x":[1]}}}`))
	})
	decoder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		dec.hdr = r.Header.Clone()
		require.NoError(t, json.NewDecoder(r.Body).Decode(&dec.body))
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer decoder.Close()
	_, _, url := startSidecar(t, Config{DecoderURL: decoder.URL})

	body := map[string]any{"model": "m", "prompt": "hello", "max_tokens": 50, "stream": true,
		"stream_options": map[string]any{"include_usage": true}, "temperature": 0.5}
	code, _, b := send(t, url+"/v1/completions", prefiller, body)
	require.Equal(t, http.StatusOK, code, string(b))
	require.JSONEq(t, `{"ok":true}`, string(b))

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1.0, pre.body["max_tokens"])
	require.Equal(t, false, pre.body["stream"])
	require.NotContains(t, pre.body, "stream_options")
	require.Equal(t, 0.5, pre.body["temperature"])
	kv := pre.body["kv_transfer_params"].(map[string]any)
	require.Equal(t, true, kv["do_remote_decode"])
	require.Equal(t, false, kv["do_remote_prefill"])

	require.Equal(t, 50.0, dec.body["max_tokens"])
	require.Equal(t, true, dec.body["stream"])
	require.Contains(t, dec.body, "stream_options")
	got, err := json.Marshal(dec.body["kv_transfer_params"])
	require.NoError(t, err)
	require.JSONEq(t, `{"do_remote_prefill":true,"do_remote_decode":false,"remote_engine_id":"e1","remote_block_ids":[1,2,3],"remote_host":"10.0.0.1","remote_port":5600,"tp_size":2,"future_field":{"x":[1]}}`, string(got))

	require.NotEmpty(t, pre.hdr.Get(RequestIDHeader))
	require.Equal(t, pre.hdr.Get(RequestIDHeader), dec.hdr.Get(RequestIDHeader))
	require.Empty(t, pre.hdr.Get(PrefillerHeader))
	require.Empty(t, dec.hdr.Get(PrefillerHeader))
}

// A client body that is not a JSON object is a 400 before anything is
// sent; one over MaxBodyBytes a 413, with a prefiller named or not (every
// body is read whole before it goes on); other paths and methods are
// proxied even with the header.
func TestSidecarBadBodiesAndOtherRoutes(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after every other cleanup
	dec := startEngine(t, server.RoleDecode)
	pre := startEngine(t, server.RolePrefill)
	_, reg, url := startSidecar(t, Config{DecoderURL: "http://" + dec.Addr(), MaxBodyBytes: 4096})

	for _, bad := range []string{`not json`, `[1,2]`, `null`, `{"a":1} {"b":2}`, `{"a":`} {
		code, _, b := send(t, url+"/v1/chat/completions", pre.Addr(), []byte(bad))
		require.Equal(t, http.StatusBadRequest, code, "%s: %s", bad, b)
		require.Contains(t, string(b), `"error"`)
	}
	code, _, b := send(t, url+"/v1/chat/completions", pre.Addr(), chat(strings.Repeat("x ", 4096), 1, false))
	require.Equal(t, http.StatusRequestEntityTooLarge, code, string(b))
	require.Equal(t, uint64(0), pre.Engine().Stats().RequestSuccess+pre.Engine().Stats().RequestRejected)
	code, _, b = send(t, url+"/v1/chat/completions", "", chat(strings.Repeat("x ", 4096), 1, false))
	require.Equal(t, http.StatusRequestEntityTooLarge, code, string(b))
	require.Equal(t, uint64(0), dec.Engine().Stats().RequestSuccess+dec.Engine().Stats().RequestRejected, "the decoder got neither")

	req, err := http.NewRequest(http.MethodGet, url+"/v1/models", nil)
	require.NoError(t, err)
	req.Header.Set(PrefillerHeader, pre.Addr())
	resp, err := client.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, 1.0, counter(t, reg, "kvroute_sidecar_requests_total", "outcome", OutcomePlain), "the 413 is counted as refused, the GET as plain")

	_, err = NewHandler(Config{}, Options{})
	require.ErrorContains(t, err, "decoderURL")
	_, err = NewHandler(Config{DecoderURL: "ftp://x"}, Options{})
	require.ErrorContains(t, err, "http")
	_, err = NewExchange(Config{PrefillTimeout: -1}, Options{})
	require.Error(t, err)
	_, err = NewExchange(Config{}, Options{Set: telemetry.Set{Registerer: reg}})
	require.ErrorContains(t, err, "already registered")
}

// llm-d's current name of the prefiller header is read when the
// pre-convention one is absent (the older name wins when both differ, as
// llm-d's sidecar trusts it first), and neither name reaches the prefiller
// or the decoder.
func TestSidecarReadsLLMDsPrefillerHeaderName(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after every other cleanup
	var mu sync.Mutex
	var preHdr, decHdr []http.Header
	prefiller := fakePrefiller(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		preHdr = append(preHdr, r.Header.Clone())
		mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"p","kv_transfer_params":{"do_remote_prefill":true,"do_remote_decode":false}}`))
	})
	decoder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		decHdr = append(decHdr, r.Header.Clone())
		mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer decoder.Close()
	_, reg, url := startSidecar(t, Config{DecoderURL: decoder.URL})

	for _, hdr := range []map[string]string{
		{PrefillerHeaderLLMD: prefiller},
		{PrefillerHeader: prefiller, PrefillerHeaderLLMD: "203.0.113.9:1"},
	} {
		req, err := http.NewRequest(http.MethodPost, url+"/v1/completions", strings.NewReader(`{"model":"m","prompt":"hello","max_tokens":5}`))
		require.NoError(t, err)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	}
	require.Equal(t, 2.0, counter(t, reg, "kvroute_sidecar_requests_total", "outcome", OutcomeSplit), "both split by the named prefiller")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, preHdr, 2)
	require.Len(t, decHdr, 2)
	for _, h := range append(preHdr, decHdr...) {
		require.Empty(t, h.Get(PrefillerHeader))
		require.Empty(t, h.Get(PrefillerHeaderLLMD))
	}
}

// A prefiller header holding a comma-separated list (repeated lines a proxy
// joined, or a router naming several) splits by its first element, as
// llm-d's sidecar takes it; before, the list was no host:port and the
// request fell back to a local prefill as bad_target.
func TestSidecarTakesTheFirstPrefillerOfAList(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after every other cleanup
	var mu sync.Mutex
	calls := 0
	prefiller := fakePrefiller(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"p","kv_transfer_params":{"do_remote_prefill":true,"do_remote_decode":false}}`))
	})
	decoder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer decoder.Close()
	_, reg, url := startSidecar(t, Config{DecoderURL: decoder.URL})
	for _, v := range []string{prefiller + ", 203.0.113.9:1", " " + prefiller + " ,203.0.113.9:1"} {
		code, _, b := send(t, url+"/v1/completions", v, []byte(`{"model":"m","prompt":"hello","max_tokens":5}`))
		require.Equal(t, http.StatusOK, code, string(b))
	}
	require.Equal(t, 2.0, counter(t, reg, "kvroute_sidecar_requests_total", "outcome", OutcomeSplit))
	require.Zero(t, counter(t, reg, "kvroute_sidecar_prefill_fallbacks_total", "reason", ReasonBadTarget))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 2, calls)
}
