package gateway

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// dialGateway opens a raw connection to the server at url, whose reads fail
// after the test's generous deadline.
func dialGateway(t *testing.T, url string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(wait)))
	return c
}

// drip writes chunk to c every interval until stop is closed or a write
// fails; the returned channel is closed when it has stopped.
func drip(c net.Conn, chunk string, interval time.Duration, stop <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := io.WriteString(c, chunk); err != nil {
					return
				}
			}
		}
	}()
	return done
}

// requireClosedByServer reads from br until the server ends the connection
// (EOF or a reset), failing on the read deadline instead.
func requireClosedByServer(t *testing.T, br *bufio.Reader) {
	t.Helper()
	_, err := io.Copy(io.Discard, br)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server kept the connection open: %v", err)
}

func TestGatewayCutsABodyTrickledPastItsReadTimeout(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{BodyReadTimeout: 300 * time.Millisecond})
	defer h.close()
	c := dialGateway(t, h.gw.URL)
	defer c.Close()
	_, err := io.WriteString(c, "POST /v1/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
	require.NoError(t, err)
	// One byte per chunk, one chunk every 20 ms, for as long as the
	// connection takes them: the body always makes some progress.
	stop := make(chan struct{})
	dripped := drip(c, "1\r\n \r\n", 20*time.Millisecond, stop)
	defer func() { close(stop); <-dripped }()

	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err, "the gateway answers before the test's deadline")
	got := readAll(t, resp)
	require.Equal(t, http.StatusRequestTimeout, resp.StatusCode, got)
	require.True(t, resp.Close, "the connection is closed after the answer")
	require.Contains(t, got, "body read timeout of 300ms")
	requireClosedByServer(t, br)
	require.Eventually(t, func() bool { return counter(t, h.reg, "completions", ResultBodyTimeout) == 1 }, wait, time.Millisecond)
	require.Eventually(t, func() bool { return h.handler.budget.InUse() == 0 }, wait, time.Millisecond)

	resp = h.post("/v1/completions", completionsBody("hello", false))
	readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, "a body sent at once passes")
}

// bodyOfSize is a completions body of exactly n bytes: a short prompt and
// a padding field the router does not tokenize.
func bodyOfSize(t *testing.T, n int) string {
	t.Helper()
	b := `{"model":"test-model","prompt":"hello","max_tokens":8,"user":""}`
	b = strings.Replace(b, `"user":""`, `"user":"`+strings.Repeat("a", n-len(b))+`"`, 1)
	require.Len(t, b, n)
	require.True(t, json.Valid([]byte(b)))
	return b
}

func TestGatewayRefusesBodiesPastItsInFlightBudgetAndReleasesIt(t *testing.T) {
	defer leakcheck.Check(t)()
	const (
		holders = 2
		size    = 512 << 10 // each holder's body; its buffer reaches it at 300 KiB sent
		sent    = 300 << 10
	)
	h := newHarness(t, 1, Config{MaxBodyBytes: 1 << 20, MaxBodyBytesInFlight: holders * size})
	defer h.close()

	// Two clients send part of their bodies and hold the whole budget.
	bodies := make([]string, holders)
	conns := make([]net.Conn, holders)
	for i := range conns {
		bodies[i] = bodyOfSize(t, size)
		conns[i] = dialGateway(t, h.gw.URL)
		defer conns[i].Close()
		_, err := fmt.Fprintf(conns[i], "POST /v1/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			size, bodies[i][:sent])
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return h.handler.budget.InUse() == holders*size }, wait, time.Millisecond)

	// A third request finds no room for even its first buffer.
	resp := h.post("/v1/chat/completions", `{"model":"test-model","messages":[]}`)
	got := readAll(t, resp)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, got)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	require.Contains(t, got, "limit of 1048576 bytes of request bodies in flight")
	require.Equal(t, 1.0, counter(t, h.reg, "chat_completions", ResultBodyBudget))
	gauge := metricValue(t, h.reg, "kvroute_gateway_request_body_bytes_in_flight")
	require.Equal(t, float64(holders*size), gauge)

	// The holders finish their bodies and are served; the budget returns
	// to zero.
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			_, err := io.WriteString(c, bodies[i][sent:])
			if !assert.NoError(t, err) {
				return
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if !assert.NoError(t, err) {
				return
			}
			got, err := io.ReadAll(resp.Body)
			assert.NoError(t, err)
			assert.Equal(t, http.StatusOK, resp.StatusCode, string(got))
		})
	}
	wg.Wait()
	require.Eventually(t, func() bool { return h.handler.budget.InUse() == 0 }, wait, time.Millisecond)
	require.Equal(t, 2.0, counter(t, h.reg, "completions", ResultSuccess))

	resp = h.post("/v1/chat/completions", `{"model":"test-model","messages":[]}`)
	readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, "room again once the bodies are done")
	require.Eventually(t, func() bool { return h.handler.budget.InUse() == 0 }, wait, time.Millisecond)
}

// metricValue reads an unlabelled counter or gauge from reg.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func TestNewRejectsAnInFlightBudgetBelowTheBodyLimit(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{MaxBodyBytes: 1 << 20, MaxBodyBytesInFlight: 1 << 19}, "below maxBodyBytes"},
		{Config{MaxBodyBytesInFlight: -1}, "maxBodyBytesInFlight -1 is negative"},
		{Config{BodyReadTimeout: -time.Second}, "bodyReadTimeout -1s is negative"},
	} {
		_, err := New(c.cfg, new(RoundRobin), Options{})
		require.ErrorContains(t, err, c.want)
	}
	h, err := New(Config{MaxBodyBytes: 1 << 30}, new(RoundRobin), Options{})
	require.NoError(t, err)
	require.Equal(t, int64(1<<30), h.cfg.MaxBodyBytesInFlight, "the default budget holds one body at the limit")
	require.Equal(t, DefaultBodyReadTimeout, h.cfg.BodyReadTimeout)
}
