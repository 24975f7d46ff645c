package sidecar

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// wideBody encodes s as UTF-16 (unit 2) or UTF-32 (unit 4), big-endian or
// not, after a byte order mark when bom.
func wideBody(s string, unit int, big, bom bool) []byte {
	var order binary.AppendByteOrder = binary.LittleEndian
	if big {
		order = binary.BigEndian
	}
	var out []byte
	if bom {
		s = "\uFEFF" + s
	}
	if unit == 2 {
		for _, u := range utf16.Encode([]rune(s)) {
			out = order.AppendUint16(out, u)
		}
		return out
	}
	for _, r := range s {
		out = order.AppendUint32(out, uint32(r))
	}
	return out
}

// A request body vLLM serves, the sidecar splits: one past a leading
// UTF-8 byte order mark, one in UTF-16 or UTF-32 (with or without a mark),
// as Python's json.loads reads the bytes FastAPI hands it. The prefiller
// and the decoder get the UTF-8 JSON it encodes. A wide body that is not
// text in its encoding is a 400 naming it, counted as bad_body; a wide
// body whose UTF-8 copy finds no room in the body budget is a 503, counted
// as body_budget. Before, each was a 400 "invalid character".
func TestSidecarReadsBodiesAsVLLMDoes(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after every other cleanup
	var mu sync.Mutex
	var preBodies, decBodies []map[string]any
	prefiller := fakePrefiller(t, func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		err := json.NewDecoder(r.Body).Decode(&m)
		mu.Lock()
		preBodies = append(preBodies, m)
		mu.Unlock()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"p","kv_transfer_params":{"do_remote_prefill":true,"do_remote_decode":false,"remote_block_ids":[1]}}`))
	})
	decoder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		err := json.NewDecoder(r.Body).Decode(&m)
		mu.Lock()
		decBodies = append(decBodies, m)
		mu.Unlock()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer decoder.Close()
	_, reg, url := startSidecar(t, Config{DecoderURL: decoder.URL})

	const doc = `{"model":"m","prompt":"héllo 😀","max_tokens":7}`
	bodies := map[string][]byte{
		"UTF-8 BOM":         append([]byte{0xEF, 0xBB, 0xBF}, doc...),
		"UTF-16LE BOM":      wideBody(doc, 2, false, true),
		"UTF-16BE":          wideBody(doc, 2, true, false),
		"UTF-32LE":          wideBody(doc, 4, false, false),
		"UTF-32BE BOM":      wideBody(doc, 4, true, true),
		"UTF-16LE no BOM":   wideBody(doc, 2, false, false),
		"UTF-16BE with BOM": wideBody(doc, 2, true, true),
	}
	for name, b := range bodies {
		code, _, out := send(t, url+"/v1/completions", prefiller, b)
		require.Equal(t, http.StatusOK, code, "%s: %s", name, out)
	}
	mu.Lock()
	require.Len(t, preBodies, len(bodies))
	require.Len(t, decBodies, len(bodies))
	for i := range preBodies {
		require.Equal(t, "héllo 😀", preBodies[i]["prompt"])
		require.Equal(t, 1.0, preBodies[i]["max_tokens"])
		require.Equal(t, "héllo 😀", decBodies[i]["prompt"])
		require.Equal(t, 7.0, decBodies[i]["max_tokens"])
		require.Contains(t, decBodies[i], "kv_transfer_params")
	}
	mu.Unlock()
	require.Equal(t, float64(len(bodies)), counter(t, reg, "kvroute_sidecar_requests_total", "outcome", OutcomeSplit))

	odd := wideBody(doc, 2, false, true)
	code, _, out := send(t, url+"/v1/completions", prefiller, odd[:len(odd)-1])
	require.Equal(t, http.StatusBadRequest, code, string(out))
	require.Contains(t, string(out), "UTF-16LE")
	lone := append(wideBody(`{"prompt":"`, 2, true, false), 0xD8, 0x00)
	lone = append(lone, wideBody(`"}`, 2, true, false)...)
	code, _, out = send(t, url+"/v1/completions", prefiller, lone)
	require.Equal(t, http.StatusBadRequest, code, string(out))
	require.Contains(t, string(out), "UTF-16BE")
	require.Equal(t, 2.0, counter(t, reg, "kvroute_sidecar_refused_requests_total", "reason", refusedBadBody))
	mu.Lock()
	require.Len(t, preBodies, len(bodies), "nothing went to the prefiller")
	mu.Unlock()
}

// The UTF-8 copy of a wide body is charged to the Handler's budget of
// body bytes in flight: with no room for it, the request is a 503 counted
// as body_budget, and nothing is sent on.
func TestSidecarChargesAWideBodysCopyToTheBudget(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	prefiller := fakePrefiller(t, func(w http.ResponseWriter, r *http.Request) {
		t.Error("the prefiller was called")
	})
	decoder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("the decoder was called")
	}))
	defer decoder.Close()
	h, reg, url := startSidecar(t, Config{DecoderURL: decoder.URL, MaxBodyBytes: 1 << 16, MaxBodyBytesInFlight: 1 << 16})
	doc := `{"model":"m","prompt":"` + strings.Repeat("x", 30000) + `"}`
	code, _, out := send(t, url+"/v1/completions", prefiller, wideBody(doc, 2, false, true))
	require.Equal(t, http.StatusServiceUnavailable, code, string(out))
	require.Equal(t, 1.0, counter(t, reg, "kvroute_sidecar_refused_requests_total", "reason", refusedBodyBudget))
	require.Zero(t, h.budget.InUse())
}

// Exchange.Prefill, as a gateway calls it, and LocalBody read a body as
// vLLM reads it: past a leading byte order mark, a wide body decoded; the
// bodies they return are UTF-8 without the mark.
func TestExchangeReadsBodiesAsVLLMDoes(t *testing.T) {
	x, err := NewExchange(Config{}, Options{})
	require.NoError(t, err)
	t.Cleanup(x.Close)
	const doc = `{"model":"m","prompt":"hi","max_tokens":2}`
	for _, b := range [][]byte{append([]byte{0xEF, 0xBB, 0xBF}, doc...), wideBody(doc, 2, false, true), wideBody(doc, 4, true, false)} {
		res, err := x.Prefill(context.Background(), "bad-target", "/v1/completions", nil, b)
		require.NoError(t, err)
		require.Equal(t, ReasonBadTarget, res.Fallback)
		require.Equal(t, doc, string(res.DecodeBody))
		require.Equal(t, doc, string(res.LocalBody))
		lb, err := LocalBody(b)
		require.NoError(t, err)
		require.Equal(t, doc, string(lb))
		_, err = PrefillBody(b)
		require.NoError(t, err)
	}
	_, err = x.Prefill(context.Background(), "h:80", "/v1/completions", nil, wideBody(doc, 2, false, true)[:5])
	require.ErrorIs(t, err, ErrBadRequest)
}
