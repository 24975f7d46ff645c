package sidecar

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// errorMessage is the message of the sidecar's error body.
func errorMessage(t *testing.T, body []byte) string {
	t.Helper()
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(body, &e), string(body))
	return e.Error.Message
}

// A request whose decoder's port is closed gets a 502 naming the kind of
// failure, and neither the decoder's address nor the operating system's
// error, with a body or without one.
func TestSidecarHidesTheUnreachableDecodersAddress(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after every other cleanup
	addr := freeAddr(t)
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	_, reg, url := startSidecar(t, Config{DecoderURL: "http://" + addr})

	code, _, b := send(t, url+"/v1/chat/completions", "", chat("hello", 1, false))
	require.Equal(t, http.StatusBadGateway, code, string(b))
	require.Equal(t, "the decoder could not be reached", errorMessage(t, b))
	require.NotContains(t, string(b), port, "the decoder's port")
	require.NotContains(t, string(b), "refused")

	resp, err := client.Get(url + "/v1/models")
	require.NoError(t, err)
	b, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusBadGateway, resp.StatusCode, string(b))
	require.Equal(t, "the decoder could not be reached", errorMessage(t, b))
	require.NotContains(t, string(b), port)

	require.Equal(t, 2.0, counter(t, reg, "kvroute_sidecar_refused_requests_total", "reason", refusedDecoderUnreachable))
}

// A decoder that closes the connection without an answer, and one that
// answers something that is no HTTP response, are told apart from an
// unreachable one: each its fixed text and its reason.
func TestSidecarClassifiesDecoderFailures(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	answer := make(chan string, 1)
	dec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		a := "" // a request the transport sends once more is closed on
		select {
		case a = <-answer:
		default:
		}
		_, _ = io.WriteString(c, a)
		_ = c.Close()
	}))
	t.Cleanup(dec.Close)
	_, port, err := net.SplitHostPort(dec.Listener.Addr().String())
	require.NoError(t, err)
	_, reg, url := startSidecar(t, Config{DecoderURL: dec.URL})

	for _, c := range []struct{ answer, text, reason string }{
		{"", "the decoder closed the connection before answering", refusedDecoderClosed},
		{"HTTP/1.1 abc nonsense\r\n\r\n", "the decoder failed to answer", refusedDecoderError},
	} {
		answer <- c.answer
		code, _, b := send(t, url+"/v1/chat/completions", "", chat("hello", 1, false))
		require.Equal(t, http.StatusBadGateway, code, string(b))
		require.Equal(t, c.text, errorMessage(t, b))
		require.NotContains(t, string(b), port)
		require.Equal(t, 1.0, counter(t, reg, "kvroute_sidecar_refused_requests_total", "reason", c.reason), c.reason)
	}
	require.Zero(t, counter(t, reg, "kvroute_sidecar_refused_requests_total", "reason", refusedDecoderUnreachable))
	// A decoder's failure befalls a request already counted by its outcome
	// (the package documentation says so).
	require.Equal(t, 2.0, counter(t, reg, "kvroute_sidecar_requests_total", "outcome", OutcomePlain))
}

// A decoder whose response breaks off after its header (here a body cut
// at 10 of the 100 bytes it announced) is counted decoder_broken, and the
// client's response is cut too, never passed off as whole.
func TestSidecarCountsADecoderResponseThatBreaksOff(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	dec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"id\":\"cm")
		_ = c.Close()
	}))
	t.Cleanup(dec.Close)
	_, reg, url := startSidecar(t, Config{DecoderURL: dec.URL})

	body, err := json.Marshal(chat("hello", 1, false))
	require.NoError(t, err)
	resp, err := client.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the header was out before the body broke")
	_, err = io.ReadAll(resp.Body)
	require.Error(t, err, "the client's response is cut, not ended as if whole")
	require.NoError(t, resp.Body.Close())
	require.Equal(t, 1.0, counter(t, reg, "kvroute_sidecar_refused_requests_total", "reason", refusedDecoderBroken))
	require.Zero(t, counter(t, reg, "kvroute_sidecar_refused_requests_total", "reason", refusedDecoderClosed))
	require.Zero(t, counter(t, reg, "kvroute_sidecar_refused_requests_total", "reason", refusedClientGone))
}
