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
	carried  atomic.Int64 // connections that carried a request, counted at its first byte
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
		c.l.carried.Add(1)
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

// At steady state, at the concurrency of the warm-up, the gateway opens no
// new connection to its engines, for generation or render: both pools keep
// every connection they opened (idle caps far above the concurrency, idle
// timeouts far above the gaps between requests), and the engines' pools are
// warmed ahead to the gateway's peak of requests in flight, so that a
// request never finds its engine's pool empty once that peak has been seen.
// No request dials after the warm-up; the warmer dials only when the peak of
// requests inside the gateway rises (the clients, between two requests,
// are not all inside it at once in every round). The
// engines' listeners count every connection that carries a request, at its
// first request byte, which comes before that request's answer: the counts
// are exact when the clients have their answers (closes, which the engine
// sees some time after the gateway's, are only logged).
//
// A hedged render whose other answer came first is left to finish in the
// background when its request was written whole (its connection survives);
// only one not yet written whole is cancelled, which closes its HTTP/1.1
// connection when part of its request was sent (else the connection goes
// back to the pool), and the render pool opens one again later. The render
// client counts its own dials and closes by reason
// (kvroute_render_connections_dialed_total and
// kvroute_render_connections_closed_total{reason}): after the warm-up every
// render connection it closes must be one closed by a cancelled request,
// no more of those than cancelled hedge losers
// (kvroute_render_hedge_losers_total{end="canceled"}), and it may dial one
// new connection per such close (beyond growing to its cap); with hedging
// off, none.
func TestEngineConnectionsAreNotChurnedAtSteadyState(t *testing.T) {
	for _, hedge := range []bool{false, true} {
		t.Run(fmt.Sprintf("hedge=%v", hedge), func(t *testing.T) { testChurn(t, hedge) })
	}
}

func testChurn(t *testing.T, hedge bool) {
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
		// The engines keep idle connections for an hour, not vLLM's 5 s: on
		// a machine slowed by other work a connection at the bottom of a
		// pool can sit idle longer than 5 s between rounds, and an engine
		// closing it is the engine's keep-alive, not the gateway's churn.
		srv, err := server.New(server.Config{Model: testModel, EnableScaleOut: true, KeepAliveTimeout: time.Hour,
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
	cfg.Render.Hedge = new(hedge)
	// A render that gives up (its queue wait, attempt or budget spent on a
	// machine busy with other tests) routes its request by load alone,
	// elsewhere than its prefix would, and its cancelled attempt closes a
	// connection: the steady state under test is one where renders answer.
	long := time.Minute
	cfg.Render.Timeout, cfg.Render.AttemptTimeout, cfg.Render.MaxQueueWait = long, &long, &long
	// The clients' side is not under test either: a client connection
	// whose header waits on a starved machine past the gateway's 10 s
	// header timeout would be closed under its request (twice, under a
	// load average of 24, a warm-up request got EOF or a reset on a new
	// connection, as such a close gives), so it gets an hour.
	gw, err := NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: cfg, Endpoints: eps,
		ReadHeaderTimeout: time.Hour, IdleTimeout: time.Hour}, Options{})
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
	// New connections: the gateway's own engine pool counts its dials
	// (warmed connections included, when they are dialed, not when first
	// used); the render pool's connections are counted at their first
	// request byte.
	tr := gw.handler.ownsTr
	dials := func() int64 {
		tr.WaitWarmers() // no request in flight: no warmer starts meanwhile
		return tr.Stats().Dials
	}
	// counted sums the engines' connections whose first request line (or,
	// for closed ones, "closed " and it) starts with prefix.
	counted := func(prefix string) (n int64) {
		for _, l := range lns {
			l.mu.Lock()
			for line, k := range l.first {
				if strings.HasPrefix(line, prefix) {
					n += int64(k)
				}
			}
			l.mu.Unlock()
		}
		return n
	}
	renders := func() int64 { return counted("POST /v1/completions/render ") }
	lines := func() map[string]int {
		m := map[string]int{}
		for _, l := range lns {
			l.mu.Lock()
			for k, v := range l.first {
				m[k] += v
			}
			l.mu.Unlock()
		}
		return m
	}
	// counter sums the gateway's counter name, over the series whose label
	// (when given) has value.
	counter := func(name, label, value string) (n int64) {
		mfs, err := gw.registry.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				match := label == ""
				for _, l := range m.GetLabel() {
					match = match || l.GetName() == label && l.GetValue() == value
				}
				if match {
					n += int64(m.GetCounter().GetValue())
				}
			}
		}
		return n
	}
	// The render client's own counts: hedges that left a loser (won or
	// lost: each abandons one attempt), its dials and its closes by reason
	// (internal/h1pool's CloseReason). The losers' own count by end is not
	// the bound: a loser whose answer arrives as it is abandoned ends
	// without an error, so it is no cancelled loser, yet the cancel may
	// already have closed its connection.
	hedges := func() int64 {
		return counter("kvroute_render_hedges_total", "outcome", "won") + counter("kvroute_render_hedges_total", "outcome", "lost")
	}
	renderDials := func() int64 { return counter("kvroute_render_connections_dialed_total", "", "") }
	renderCloses := func(reason string) int64 {
		return counter("kvroute_render_connections_closed_total", "reason", reason)
	}
	allRenderCloses := func() int64 { return counter("kvroute_render_connections_closed_total", "", "") }
	for range 2 {
		round()
	}
	warmDials, warmRenders, warmLines, warmPeak := dials(), renders(), lines(), tr.Stats().Peak
	warmBy := tr.DialedTo()
	require.NotEmpty(t, warmBy, "the warm-up dialed an engine")
	// The render pool may still grow up to its cap (8 connections per
	// renderer) if the warm-up never had 8 renders in flight to each; that
	// is growth, not churn. Otherwise it opens a connection only in place
	// of one its client closed, and at steady state the client closes one
	// only for a render attempt cancelled with its request in flight: a
	// hedge loser partly written (the budgets here are a minute; one of
	// which no byte was sent keeps its connection).
	// net/http's Transport, which the render client used before, also
	// retired a connection whose writer goroutine reported the request
	// written more than 50 ms after the answer came (a machine busy with
	// other tests); the render client now writes and reads on the render's
	// goroutine (internal/h1pool), as the gateway's engine pool does.
	warmRenderDials, warmAll, warmCanceled, warmHedges := renderDials(), allRenderCloses(), renderCloses("canceled"), hedges()
	renderRoom := max(0, int64(engines*8)-(warmRenderDials-warmAll))
	for range rounds {
		round()
	}
	t.Logf("after warm-up: %d engine connections dialed, %d render connections (%d dialed, %d closed of which %d cancelled), by first request line %v",
		warmDials, warmRenders, warmRenderDials, warmAll, warmCanceled, warmLines)
	t.Logf("engine pool: peak %d requests in flight, open connections %v", tr.Stats().Peak, tr.OpenConns())
	by := tr.DialedTo()
	allCloses := allRenderCloses()
	t.Logf("after %d more rounds: %d dialed (by engine: %v, after warm-up %v), %d render connections (%d dialed, %d closed of which %d cancelled), %d hedges with a loser, by first request line %v",
		rounds, dials(), by, warmBy, renders(), renderDials(), allCloses, renderCloses("canceled"), hedges(), lines())
	for key, n := range by {
		w, ok := warmBy[key]
		if !ok {
			// The router chose this engine for the first time after the
			// warm-up (by load: on a machine slowed by other work, the
			// engine holding the shared prefix looks busy): its pool
			// starts now, from nothing, and its first requests dial. That
			// is not churn; the steady state under test is that of the
			// engines the warm-up brought to the peak.
			t.Logf("engine %s first used after the warm-up: %d dialed, %d by a request", key, n.Dials, n.Waited)
			continue
		}
		// A request that raises the peak of requests in flight may find
		// the pool empty: the warmer learns of the new peak at the
		// request's entry and dials while it renders, and on a machine
		// busy with other work the render can finish first. Without a new
		// peak, none waits.
		require.LessOrEqual(t, n.Waited-w.Waited, tr.Stats().Peak-warmPeak, "no request waits for a new connection to engine %s at steady state but for a new peak", key)
		// The warmer dials only for a new peak of requests in flight: the
		// 32 clients are all inside the gateway at once only now and
		// then, so the peak may still rise after the warm-up (by one
		// request in a few runs).
		require.LessOrEqual(t, n.Dials-w.Dials, tr.Stats().Peak-warmPeak, "no new connection to engine %s at steady state but warmed ones for a new peak", key)
	}
	// Every render connection carried a request, counted at the renderer
	// at its first byte (which came before its answer), but one a
	// cancelled request closed before its first byte.
	require.LessOrEqual(t, renders(), renderDials(), "the renderers saw the render client's dials")
	require.LessOrEqual(t, renderDials()-renders(), renderCloses("canceled"), "every render connection carried a request but cancelled ones")
	canceled := renderCloses("canceled") - warmCanceled
	require.Equal(t, canceled, allCloses-warmAll,
		"no render connection closed at steady state but by a cancelled request (closes by reason: broken %d, asked %d, idle %d)",
		renderCloses("broken"), renderCloses("asked"), renderCloses("idle"))
	require.LessOrEqual(t, canceled, hedges()-warmHedges, "each cancelled request was a hedge's loser")
	require.LessOrEqual(t, renderDials()-warmRenderDials, renderRoom+canceled,
		"no new render connection at steady state but up to the cap and one per connection a cancelled hedge loser closed")
	if !hedge {
		require.Zero(t, hedges())
		require.Zero(t, renderCloses("canceled"))
	}
	// The render pool stays within its endpoints' concurrency limit (8
	// each: the render client caps its connections per renderer there) and
	// its cancelled losers;
	// the engine pool within the peak of requests in flight (conc), plus
	// the requests that dialed while the warmer was dialing.
	require.LessOrEqual(t, renders(), int64(engines*8)+renderCloses("canceled"), "the render pool stays within its concurrency")
	require.LessOrEqual(t, dials(), int64(engines*2*conc), "the engine pool stays within the concurrency")
}

func assertNoErr(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}
