package sidecar

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A decoder that answers later than Config.ResponseWriteTimeout (a
// non-streamed completion is answered only once it is generated whole)
// has its answer passed to a client that reads it. The write deadline
// bounds the wait for the client, not for the decoder: it is armed when
// the decoder's response starts. Before, it was armed before the request
// went to the decoder, so the response header's write failed on the
// expired deadline: every request the decoder took longer than the
// timeout to answer was cut and counted as client_stalled.
func TestSidecarPassesAnAnswerSlowerThanTheWriteTimeout(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after every other cleanup
	const writeTimeout = 300 * time.Millisecond
	decoder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The decoder's slowness under test: its answer comes well after
		// the sidecar's write timeout.
		select {
		case <-time.After(4 * writeTimeout):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[{"text":"done"}]}`))
	}))
	t.Cleanup(decoder.Close)
	_, reg, url := startSidecar(t, Config{DecoderURL: decoder.URL, ResponseWriteTimeout: writeTimeout})

	for _, path := range []string{"/v1/completions", "/v1/models"} { // a body, and none
		var code int
		var b []byte
		if path == "/v1/models" {
			resp, err := client.Get(url + path)
			require.NoError(t, err)
			b, err = io.ReadAll(resp.Body)
			require.NoError(t, err, "the response is whole")
			require.NoError(t, resp.Body.Close())
			code = resp.StatusCode
		} else {
			code, _, b = send(t, url+path, "", map[string]any{"model": "m", "prompt": "hello", "max_tokens": 4000})
		}
		require.Equal(t, http.StatusOK, code, path)
		require.JSONEq(t, `{"choices":[{"text":"done"}]}`, string(b), path)
	}
	require.Zero(t, counter(t, reg, "kvroute_sidecar_refused_requests_total", "reason", refusedClientStalled),
		"a client that read its answer did not stall")
}
