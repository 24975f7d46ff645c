package sidecar

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// The prefill request is a new request of the sidecar's, so the client's
// connection-level headers stay behind: the hop-by-hop set, every header
// the client's Connection header names (RFC 9110 §7.6.1), and Expect (the
// exchange sends its body at once; a 100-continue was the client's
// exchange with the sidecar). End-to-end headers still reach the prefiller.
func TestExchangeDropsConnectionScopedHeaders(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	got := make(chan http.Header, 1)
	pre := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kv_transfer_params":{"do_remote_prefill":true,"remote_host":"p"}}`)
	}))
	t.Cleanup(pre.Close)
	x, err := NewExchange(Config{}, Options{})
	require.NoError(t, err)
	t.Cleanup(x.Close)

	hdr := http.Header{
		"Connection":    {"X-Hop-One, x-hop-two", "keep-alive"},
		"X-Hop-One":     {"secret"},
		"X-Hop-Two":     {"secret"},
		"Expect":        {"100-continue"},
		"Authorization": {"Bearer kept"},
		"X-End-To-End":  {"kept"},
	}
	res, err := x.Prefill(context.Background(), strings.TrimPrefix(pre.URL, "http://"), "/v1/completions", hdr,
		[]byte(`{"model":"m","prompt":"p"}`))
	require.NoError(t, err)
	require.True(t, res.Split)
	h := <-got
	for _, k := range []string{"X-Hop-One", "X-Hop-Two", "Expect"} {
		require.Empty(t, h.Values(k), "%s reached the prefiller", k)
	}
	require.Equal(t, "Bearer kept", h.Get("Authorization"))
	require.Equal(t, "kept", h.Get("X-End-To-End"))
	require.Len(t, hdr.Values("X-Hop-One"), 1, "the caller's headers are left as they were")
}

// Both halves of a split carry one X-Request-Id (vLLM's KV connectors
// match the decode half to the prefill half by it), even when the
// client's Connection header names X-Request-Id: the decoder's request
// lost it (the proxy drops the headers Connection names) while the
// prefiller's carried it, and the two halves had different IDs.
func TestSidecarSendsTheRequestIDOnBothHalves(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	ids := make(chan string, 2)
	prefiller := fakePrefiller(t, func(w http.ResponseWriter, r *http.Request) {
		ids <- "prefill " + r.Header.Get(RequestIDHeader)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kv_transfer_params":{"do_remote_prefill":true,"remote_host":"p"}}`)
	})
	decoder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ids <- "decode " + r.Header.Get(RequestIDHeader)
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(decoder.Close)
	_, _, url := startSidecar(t, Config{DecoderURL: decoder.URL})
	req, err := http.NewRequest(http.MethodPost, url+"/v1/completions", strings.NewReader(`{"model":"m","prompt":"p"}`))
	require.NoError(t, err)
	req.Header.Set(PrefillerHeader, prefiller)
	req.Header.Set("Connection", "X-Request-Id")
	req.Header.Set(RequestIDHeader, "client-id-1")
	resp, err := client.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "prefill client-id-1", <-ids)
	require.Equal(t, "decode client-id-1", <-ids)
}
