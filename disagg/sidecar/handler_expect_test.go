package sidecar

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// decodeRequest is what a fake decoder got: the request's header and body.
type decodeRequest struct {
	header http.Header
	body   string
}

// startHeaderDecoder is a fake decoder on loopback that hands every
// request it gets to got and answers it 200.
func startHeaderDecoder(t *testing.T) (url string, got chan decodeRequest) {
	t.Helper()
	got = make(chan decodeRequest, 1)
	decoder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- decodeRequest{header: r.Header.Clone(), body: string(b)}
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(decoder.Close)
	return decoder.URL, got
}

// A client's Expect: 100-continue was its exchange with the sidecar, which
// has read the whole body before anything goes to the decoder: passed on,
// it makes the decoder's transport wait for a 100 Continue before sending
// a body it already holds (a round trip more, or a second with a decoder
// that ignores Expect). An Upgrade offered with a body (Upgrade: h2c, as
// Java and Ktor clients send it) is not passed on either: vLLM's server
// takes a POST offering it for one without a body. Neither the plain nor
// the split request carries them to the decoder, and both are answered.
func TestSidecarDoesNotPassExpectOrUpgradeToTheDecoder(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after every other cleanup
	decoderURL, got := startHeaderDecoder(t)
	prefiller := fakePrefiller(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kv_transfer_params":{"do_remote_prefill":true,"remote_host":"p"}}`)
	})
	_, _, url := startSidecar(t, Config{DecoderURL: decoderURL})
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)

	for _, pre := range []string{"", prefiller} {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url+"/v1/completions",
			bytes.NewReader([]byte(`{"model":"m","prompt":"p"}`)))
		require.NoError(t, err)
		req.Header.Set("Expect", "100-continue")
		req.Header.Set("Connection", "Upgrade, HTTP2-Settings")
		req.Header.Set("Upgrade", "h2c")
		req.Header.Set("Http2-Settings", "AAMAAABkAAQCAAAAAAIAAAAA")
		if pre != "" {
			req.Header.Set(PrefillerHeader, pre)
		}
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
		dr := <-got
		for _, k := range []string{"Expect", "Upgrade", "Connection", "Http2-Settings"} {
			require.Empty(t, dr.header.Values(k), "prefiller %q: %s reached the decoder", pre, k)
		}
		require.Contains(t, dr.body, `"prompt":"p"`, "prefiller %q", pre)
	}
}

// A request without a body goes to the decoder as it came, an Upgrade
// (a WebSocket handshake) included.
func TestSidecarPassesABodylessUpgradeToTheDecoder(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after every other cleanup
	decoderURL, got := startHeaderDecoder(t)
	_, _, url := startSidecar(t, Config{DecoderURL: decoderURL})
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url+"/v1/realtime", nil)
	require.NoError(t, err)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "websocket", (<-got).header.Get("Upgrade"))
}
