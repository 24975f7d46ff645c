package sidecar

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// A client that sends a request header and then only part of its body is
// answered 408 after Config.BodyReadTimeout, its connection closed, and
// counted: before, the sidecar waited for the rest of the body for as long
// as the client held the connection open.
func TestSidecarTimesOutASlowBody(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after every other cleanup
	_, reg, url := startSidecar(t, Config{DecoderURL: "http://" + freeAddr(t), BodyReadTimeout: 200 * time.Millisecond})

	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	require.NoError(t, err)
	defer c.Close()
	_, err = fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"model\":")
	require.NoError(t, err)
	// The sidecar answers after 200 ms; the deadline only guards against
	// a hang.
	require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err, "the sidecar answers a stalled body")
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusRequestTimeout, resp.StatusCode, string(b))
	require.Contains(t, string(b), "body read timeout")
	require.True(t, resp.Close, "the connection is closed after a stalled body")
	_, err = br.ReadByte()
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, 1.0, counter(t, reg, "kvroute_sidecar_refused_requests_total", "reason", refusedBodyTimeout))
}

// The bodies a sidecar holds at once are bounded by
// Config.MaxBodyBytesInFlight: while one request's body is held (its
// prefill step under way), a body that finds no room beside it is answered
// 503 with Retry-After and counted, and once the first is done the same
// body is served.
func TestSidecarBoundsBodyBytesInFlight(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after every other cleanup
	dec := fakePrefiller(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) })
	arrived, release := make(chan struct{}), make(chan struct{})
	pre := fakePrefiller(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
		http.Error(w, "no", http.StatusServiceUnavailable)
	})
	reg := prometheus.NewRegistry()
	h, err := NewHandler(Config{DecoderURL: "http://" + dec, MaxBodyBytes: 100 << 10, MaxBodyBytesInFlight: 300 << 10},
		Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	served := make(chan struct{}, 3) // one per request, once the Handler has returned
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		served <- struct{}{}
	}))
	t.Cleanup(func() { srv.Close(); h.Close() })
	url := srv.URL
	unblock := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock) // first of the cleanups: the servers' Close waits for the prefiller's handler

	// 90 KiB: its buffers are 64 KiB, then 90 KiB; split, it holds about
	// three times that during its prefill step (its parsed members and its
	// prefill body are copies), which fits alone, not beside another body
	// of 64 KiB or more.
	body := chat(strings.Repeat("x", 90<<10), 1, false)
	raw, err := json.Marshal(body)
	require.NoError(t, err)
	first := make(chan int, 1) // the first request's status, 0 when it failed
	go func() {                // no require off the test's goroutine
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(raw))
		req.Header.Set(PrefillerHeader, pre)
		resp, err := client.Do(req)
		if err != nil {
			first <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-arrived // the first body is held until its prefill step ends
	require.Greater(t, h.budget.InUse(), int64(3*len(raw)))

	code, hdr, b := send(t, url+"/v1/chat/completions", "", body)
	require.Equal(t, http.StatusServiceUnavailable, code, string(b))
	require.Equal(t, "1", hdr.Get("Retry-After"))
	require.Contains(t, string(b), "bytes of request bodies in flight")
	require.Equal(t, 1.0, counter(t, reg, "kvroute_sidecar_refused_requests_total", "reason", refusedBodyBudget))

	unblock()
	require.Equal(t, http.StatusOK, <-first, "the first request falls back to a local prefill")
	<-served
	<-served // both Handlers have returned: the first body is given back
	require.Zero(t, h.budget.InUse())
	code, _, b = send(t, url+"/v1/chat/completions", "", body)
	require.Equal(t, http.StatusOK, code, string(b))
	require.Equal(t, 1.0, counter(t, reg, "kvroute_sidecar_requests_total", "outcome", OutcomePlain))
	require.Equal(t, 1.0, counter(t, reg, "kvroute_sidecar_prefill_fallbacks_total", "reason", ReasonStatus))
}

// The body limits' defaults and their validation.
func TestSidecarBodyLimitsConfig(t *testing.T) {
	x, err := NewExchange(Config{}, Options{})
	require.NoError(t, err)
	require.Equal(t, DefaultBodyReadTimeout, x.Config().BodyReadTimeout)
	require.Equal(t, int64(DefaultMaxBodyBytesInFlight), x.Config().MaxBodyBytesInFlight)
	x, err = NewExchange(Config{MaxBodyBytes: 1 << 30}, Options{})
	require.NoError(t, err)
	require.Equal(t, int64(1<<30), x.Config().MaxBodyBytesInFlight, "the default is never below maxBodyBytes")
	_, err = NewExchange(Config{MaxBodyBytes: 2048, MaxBodyBytesInFlight: 1024}, Options{})
	require.ErrorContains(t, err, "maxBodyBytesInFlight 1024 is below maxBodyBytes 2048")
	_, err = NewExchange(Config{BodyReadTimeout: -time.Second}, Options{})
	require.ErrorContains(t, err, "bodyReadTimeout")
	_, err = NewExchange(Config{MaxBodyBytesInFlight: -1}, Options{})
	require.Error(t, err)
}
