package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
	closed   atomic.Int64 // closes of connections that carried a request
	mu       sync.Mutex
	first    map[string]int // first request line of each connection
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
		c = &sniffConn{Conn: c, l: l}
	}
	return c, err
}

func (c *sniffConn) Close() error {
	c.l.mu.Lock()
	if c.line != "" {
		c.l.closed.Add(1) // a connection that carried a request
	}
	c.l.first["closed "+c.line]++
	c.l.mu.Unlock()
	return c.Conn.Close()
}

type sniffConn struct {
	net.Conn
	l    *countingListener
	done bool
	line string
}

func (c *sniffConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if !c.done && n > 0 {
		c.done = true
		line, _, _ := strings.Cut(string(p[:n]), "\r\n")
		c.line = line
		c.l.mu.Lock()
		if c.l.first == nil {
			c.l.first = map[string]int{}
		}
		c.l.first[line]++
		c.l.mu.Unlock()
	}
	return n, err
}

// churnPrompt is a prompt of about n simulated tokens: a shared prefix and
// a unique suffix.
func churnPrompt(n, i int) string {
	var b strings.Builder
	for j := range n - 8 {
		fmt.Fprintf(&b, "w%d ", j%97)
	}
	fmt.Fprintf(&b, "request %d ends here", i)
	return b.String()
}

// At steady state no connection from the gateway to its engines that has
// carried a request, for generation or render, is closed and redialed, and
// the pools stay within the concurrency. The engines' listeners count every
// accepted connection (and what its first request was) and every close.
// New connections after warm-up are not asserted away: both pools dial
// whenever a request finds no idle connection, so they follow the highest
// number of simultaneous requests an engine has seen, which still rises now
// and then. Nor are closes of connections that never carried a request:
// net/http's Transport (the render client's) keeps a connection it dialed
// for a request that an idle one served first, and the engine's header
// timeout closes it if it is still unused (logged as "closed " with an
// empty first line). A hedged render whose other answer came first is
// cancelled, and cancelling an HTTP/1.1 request in flight closes its
// connection: those closes are by design, so at most one close per hedge
// decided after warm-up (kvroute_render_hedges_total, won or lost) is
// allowed.
func TestEngineConnectionsAreNotChurnedAtSteadyState(t *testing.T) {
	defer leakcheck.Check(t)()
	const engines, conc, rounds = 2, 32, 3
	var lns []*countingListener
	var srvs []*server.Server
	var served []chan error
	var eps []kvroute.Endpoint
	for range engines {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		cl := &countingListener{Listener: ln}
		srv, err := server.New(server.Config{Model: testModel, EnableScaleOut: true,
			Engine: simengine.Config{BlockSize: 16, NumGPUBlocks: 4096, MaxNumSeqs: 512, PrefillTokensPerSecond: 1e9, DecodeStep: 50 * time.Microsecond}}, server.Options{})
		require.NoError(t, err)
		ch := make(chan error, 1)
		go func() { ch <- srv.Serve(cl) }()
		lns, srvs, served = append(lns, cl), append(srvs, srv), append(served, ch)
		eps = append(eps, kvroute.Endpoint{ID: ln.Addr().String()})
	}
	cfg := kvroute.DefaultConfig()
	cfg.Model = testModel
	cfg.BlockSize = 16
	cfg.Events.Enabled = new(false)
	gw, err := NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: cfg, Endpoints: eps}, Options{})
	require.NoError(t, err)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc}}
	defer func() {
		client.CloseIdleConnections()
		require.NoError(t, gw.Shutdown(context.Background()))
		for i, s := range srvs {
			require.NoError(t, s.Close())
			<-served[i]
		}
	}()

	var seq atomic.Int64
	round := func() {
		var wg sync.WaitGroup
		for range conc {
			wg.Go(func() {
				for range 4 {
					i := seq.Add(1)
					b, _ := json.Marshal(map[string]any{"model": testModel, "max_tokens": 1, "prompt": churnPrompt(1000, int(i))})
					resp, err := client.Post(gw.URL()+"/v1/completions", "application/json", strings.NewReader(string(b)))
					if !assertNoErr(t, err) {
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK || resp.Header.Get(HeaderPromptTokens) == "0" {
						t.Errorf("status %d, prompt tokens %q", resp.StatusCode, resp.Header.Get(HeaderPromptTokens))
					}
				}
			})
		}
		wg.Wait()
	}
	accepted := func() (n int64) {
		for _, l := range lns {
			n += l.accepted.Load()
		}
		return n
	}
	closed := func() (n int64) {
		for _, l := range lns {
			n += l.closed.Load()
		}
		return n
	}
	for range 2 {
		round()
	}
	hedges := func() (n int64) {
		mfs, err := gw.registry.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() != "kvroute_render_hedges_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "outcome" && (l.GetValue() == "won" || l.GetValue() == "lost") {
						n += int64(m.GetCounter().GetValue())
					}
				}
			}
		}
		return n
	}
	warm, warmClosed, warmHedges := accepted(), closed(), hedges()
	for range rounds {
		round()
	}
	for i, l := range lns {
		l.mu.Lock()
		t.Logf("engine %d: connections by first request line: %v", i, l.first)
		l.mu.Unlock()
	}
	t.Logf("connections after warm-up: %d (%d closed, %d hedges); after %d more rounds: %d (%d closed, %d hedges)", warm, warmClosed, warmHedges, rounds, accepted(), closed(), hedges())
	require.LessOrEqual(t, closed()-warmClosed, hedges()-warmHedges, "no engine connection is closed at steady state but a cancelled hedge's")
	// Every pool grows at most to the peak of simultaneous requests per
	// engine: conc for generation, conc for render, per engine.
	require.LessOrEqual(t, accepted(), int64(engines*2*conc), "the pools stay within the concurrency")
}

func assertNoErr(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}
