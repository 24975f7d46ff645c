package gateway

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/h1pool"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

// The retry with a local prefill carries the client's body, without the
// prefiller's transfer parameters, on every connection it is sent on: when
// the decode endpoint closes the kept-alive connection as the retry
// arrives, the transport's resend on a new connection sends that body too,
// not the exchanged one the first request was built over (whose length
// differs, which failed the write, and the client got a 502).
func TestRetryLocalResendsTheLocalBodyOnANewConnection(t *testing.T) {
	defer leakcheck.Check(t)()
	local := []byte(`{"model":"m","prompt":"hello"}`)
	exchanged := []byte(`{"model":"m","prompt":"hello","kv_transfer_params":{"do_remote_prefill":true,"remote_block_ids":[1,2,3]}}`)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		mu   sync.Mutex
		seen []string // the bodies the endpoint read, by connection
		wg   sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 1; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func(n int, c net.Conn) {
				defer wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				for i := 0; ; i++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					b, _ := io.ReadAll(req.Body)
					mu.Lock()
					seen = append(seen, fmt.Sprintf("conn%d: %s", n, b))
					mu.Unlock()
					switch {
					case n == 1 && i == 0: // the split request fails (its KV transfer did)
						_, _ = io.WriteString(c, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\nfail")
					case n == 1 && i == 1: // the retry arrives as the endpoint closes the connection
						return
					default:
						_, _ = fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
					}
				}
			}(n, c)
		}
	}()
	defer func() { _ = ln.Close(); wg.Wait() }()

	tr := h1pool.New(h1pool.Config{MaxIdlePerHost: 4})
	defer tr.Close()
	h := &Handler{
		transport: tr,
		log:       slog.New(slog.DiscardHandler),
		exchanger: &exchangeState{retries: prometheus.NewCounter(prometheus.CounterOpts{Name: "retries_total"})},
	}
	out, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://"+ln.Addr().String()+"/v1/completions", bytes.NewReader(exchanged))
	require.NoError(t, err)
	failed, err := h.transport.RoundTrip(out)
	require.NoError(t, err)
	require.Equal(t, http.StatusInternalServerError, failed.StatusCode)

	resp, err := h.retryLocal(out, failed, local)
	require.NoError(t, err, "the retry with a local prefill failed")
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, string(local), string(b))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"conn1: " + string(exchanged), "conn1: " + string(local), "conn2: " + string(local)}, seen)
}
