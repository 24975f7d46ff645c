package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/gateway"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
	"github.com/kvroute/kvroute/telemetry"
)

// runRole runs the child role named by roleEnv and reports whether there
// was one.
func runRole() (bool, error) {
	role := os.Getenv(roleEnv)
	if role == "" {
		return false, nil
	}
	args := []byte(os.Getenv(argEnv))
	switch role {
	case "engine":
		return true, runEngine(args)
	case "gateway":
		return true, runGateway(args)
	case "pool":
		return true, runPool(args)
	}
	return true, fmt.Errorf("unknown %s %q", roleEnv, role)
}

// engineArgs configure an engine child.
type engineArgs struct {
	Model string `json:"model"`
}

// engineReady is an engine child's ready line.
type engineReady struct {
	ID     string `json:"id"`
	Events string `json:"events"`
}

// runEngine serves one fast simulated vLLM (render routes on, KV events on
// a free loopback port, steps a thousand times shorter than the default)
// until stdin closes.
func runEngine(raw []byte) error {
	var a engineArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	id := ln.Addr().String()
	srv, err := server.New(server.Config{
		Model:          a.Model,
		EnableScaleOut: true,
		Engine:         simengine.Config{TimeScale: 1e-3},
		KVEvents: server.KVEventsConfig{
			EnableKVCacheEvents: true, Publisher: "zmq",
			Endpoint: "tcp://127.0.0.1:0", Topic: "kv@" + id + "@" + a.Model,
		},
	}, server.Options{})
	if err != nil {
		ln.Close()
		return err
	}
	cl := &countingListener{Listener: ln}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(cl) }()
	if err := printJSON(engineReady{ID: id, Events: srv.KVEventsEndpoint()}); err != nil {
		return err
	}
	commandLoop(func(cmd string) any {
		if cmd == "drop" {
			return cl.closeAll()
		}
		return engineStats{Accepted: cl.accepted.Load(), ClosedByClient: cl.byClient.Load(), ClosedByEngine: cl.byEngine.Load()}
	})
	err = srv.Close()
	if serr := <-served; serr != nil && !errors.Is(serr, net.ErrClosed) && !strings.Contains(serr.Error(), "closed") {
		err = errors.Join(err, serr)
	}
	return err
}

// engineStats is an engine child's answer to "stats".
type engineStats struct {
	// Accepted counts the TCP connections the engine has accepted: new
	// connections from the gateway or the load generator.
	Accepted int64 `json:"accepted"`
	// ClosedByClient and ClosedByEngine count the connections closed,
	// by the side that closed first: the client when the engine's read
	// had ended (EOF or reset) before the engine closed it, else the
	// engine (its header timeout, or its shutdown).
	ClosedByClient int64 `json:"closedByClient"`
	ClosedByEngine int64 `json:"closedByEngine"`
}

// countingListener counts accepted connections and, as they close, which
// side closed them; it holds the open ones for closeAll.
type countingListener struct {
	net.Listener
	accepted, byClient, byEngine atomic.Int64

	mu   sync.Mutex
	open map[*sideConn]struct{}
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.accepted.Add(1)
	sc := &sideConn{Conn: c, l: l}
	l.mu.Lock()
	if l.open == nil {
		l.open = map[*sideConn]struct{}{}
	}
	l.open[sc] = struct{}{}
	l.mu.Unlock()
	return sc, nil
}

// droppedConns is an engine child's answer to "drop".
type droppedConns struct {
	Closed int `json:"closed"`
}

// closeAll closes every connection open, counted as the engine's closes
// (or the client's, for those it had closed first), and returns how many
// it closed. gwload sends "drop" before a cell that follows another run's,
// when no load runs: the connections left are the idle ones of the cells
// before (a load generator's, a gateway's pools), which the engine's
// keep-alive timeout (vLLM's 5 s) would otherwise close in the middle of a
// later cell's window, counted as that target's churn. A client whose pool
// holds one finds it closed before reuse, as after a keep-alive close.
//
// They are reset (SO_LINGER 0), not closed with a FIN: after a FIN the
// engine's socket waits in FIN_WAIT2 for the client's own close, which an
// h1pool pool (a gateway's) makes only when it next takes the connection,
// and the engine's socket enters TIME_WAIT then, in some later window,
// counted there with no close to match it. A reset leaves no socket
// behind on either side.
func (l *countingListener) closeAll() droppedConns {
	l.mu.Lock()
	conns := make([]*sideConn, 0, len(l.open))
	for c := range l.open {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		if tc, ok := c.Conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}
	return droppedConns{Closed: len(conns)}
}

// sideConn tells, when the engine closes it, whether the client had closed
// it first: a read or a write that failed with an error other than a
// deadline (EOF, a reset, a broken pipe) before the engine's Close.
type sideConn struct {
	net.Conn
	l              *countingListener
	peerGone, done atomic.Bool
}

func (c *sideConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.failed(err)
	return n, err
}

func (c *sideConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.failed(err)
	return n, err
}

// failed records an I/O error that means the client has gone.
func (c *sideConn) failed(err error) {
	if err != nil && !c.done.Load() && !errors.Is(err, os.ErrDeadlineExceeded) {
		c.peerGone.Store(true)
	}
}

func (c *sideConn) Close() error {
	if !c.done.Swap(true) {
		if c.peerGone.Load() {
			c.l.byClient.Add(1)
		} else {
			c.l.byEngine.Add(1)
		}
		c.l.mu.Lock()
		delete(c.l.open, c)
		c.l.mu.Unlock()
	}
	return c.Conn.Close()
}

// CloseWrite half-closes the connection (net/http's server does before
// closing a connection whose request it did not read whole).
func (c *sideConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// gatewayArgs configure a gateway child.
type gatewayArgs struct {
	Policy    gateway.Policy     `json:"policy"`
	Model     string             `json:"model"`
	Endpoints []kvroute.Endpoint `json:"endpoints"`
	// TokenizeOnce forwards completions as the rendered token IDs
	// (gateway.Config.TokenizeOnce).
	TokenizeOnce bool `json:"tokenizeOnce"`
	// Exchange puts exchangeFront before the gateway's proxy.
	Exchange bool `json:"exchange"`
}

// policyOf is the gateway policy of a target.
func policyOf(target string) gateway.Policy {
	switch target {
	case targetPreciseOnce:
		return gateway.PolicyPrecise
	case targetRoundRobinExchange:
		return gateway.PolicyRoundRobin
	}
	return gateway.Policy(target)
}

// gatewayReady is a gateway child's ready line.
type gatewayReady struct {
	URL string `json:"url"`
}

// gatewayGCPercent, set at link time (go build -ldflags
// "-X main.gatewayGCPercent=400"), makes the gateway child run with that
// GOGC: a binary built so serves as -baseline to measure a GC setting
// against the default in one run.
var gatewayGCPercent string

// runGateway serves kvroute's gateway (package gateway) in front of
// the engines until stdin closes. Under the precise policy it waits until
// its router is subscribed to every engine's KV events.
func runGateway(raw []byte) error {
	var a gatewayArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return err
	}
	if gatewayGCPercent != "" {
		n, err := strconv.Atoi(gatewayGCPercent)
		if err != nil {
			return fmt.Errorf("gatewayGCPercent %q: %w", gatewayGCPercent, err)
		}
		debug.SetGCPercent(n)
	}
	cfg := kvroute.DefaultConfig()
	cfg.Model = a.Model
	cfg.Events.Enabled = new(a.Policy == gateway.PolicyPrecise)
	cfg.Events.Replay = new(false)
	proxy := gateway.Config{Model: a.Model}
	if a.TokenizeOnce {
		proxy.TokenizeOnce = []render.API{render.APICompletions}
	}
	srv, err := gateway.NewServer(context.Background(), gateway.ServerConfig{
		Listen: "127.0.0.1:0", Policy: a.Policy, Router: cfg,
		Proxy: proxy, Endpoints: a.Endpoints,
	}, gateway.Options{Set: telemetry.Set{TracerProvider: renderLabeler{}}})
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	if r := srv.Router(); r != nil {
		deadline := time.Now().Add(30 * time.Second)
		for _, e := range a.Endpoints {
			for {
				if st, ok := r.Events().Status(e.ID); ok && st.Connected {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("gateway: not subscribed to %s's KV events within 30 s", e.ID)
				}
				time.Sleep(10 * time.Millisecond) // polling a status, not synchronising
			}
		}
	}
	url := srv.URL()
	if a.Exchange {
		var stop func()
		if url, stop, err = serveExchangeFront(newExchangeFront(srv.Handler(), a.Endpoints)); err != nil {
			return err
		}
		defer stop()
	}
	if err := printJSON(gatewayReady{URL: url}); err != nil {
		return err
	}
	commandLoop(func(cmd string) any {
		f := strings.Fields(cmd)
		switch {
		case f[0] == "mem":
			return readMem()
		case f[0] == "allocs" && len(f) == 2:
			if err := writeAllocs(f[1]); err != nil {
				return map[string]string{"error": err.Error()}
			}
		}
		return struct{}{}
	})
	return nil
}

// memStats is a gateway child's answer to "mem": its cumulative allocation
// and GC counters (runtime/metrics), sampled around a window.
type memStats struct {
	AllocBytes uint64  `json:"allocBytes"` // bytes allocated on the heap
	Allocs     uint64  `json:"allocs"`     // heap objects allocated
	GCCycles   uint64  `json:"gcCycles"`   // completed GC cycles
	GCCPU      float64 `json:"gcCPU"`      // CPU seconds spent in GC (mark, assist, pauses)
}

var memSamples = []metrics.Sample{
	{Name: "/gc/heap/allocs:bytes"},
	{Name: "/gc/heap/allocs:objects"},
	{Name: "/gc/cycles/total:gc-cycles"},
	{Name: "/cpu/classes/gc/total:cpu-seconds"},
}

func readMem() memStats {
	s := slices.Clone(memSamples)
	metrics.Read(s)
	return memStats{AllocBytes: s[0].Value.Uint64(), Allocs: s[1].Value.Uint64(),
		GCCycles: s[2].Value.Uint64(), GCCPU: s[3].Value.Float64()}
}

// writeAllocs writes the cumulative allocation profile; two of them around
// a window, with go tool pprof -base, show the window's allocations.
func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	return errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
}

// commandLoop answers stdin commands until stdin closes: "profile <file>"
// starts a CPU profile, "unprofile" stops it; other commands go to extra
// (nil: answered with {}). Every command is answered with one JSON line.
func commandLoop(extra func(cmd string) any) {
	sc := bufio.NewScanner(os.Stdin)
	var prof *os.File
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		var ans any = struct{}{}
		switch {
		case f[0] == "profile" && len(f) == 2 && prof == nil:
			var err error
			if prof, err = os.Create(f[1]); err == nil {
				if err = pprof.StartCPUProfile(prof); err != nil {
					prof.Close()
					prof = nil
				}
			}
			if err != nil {
				ans = map[string]string{"error": err.Error()}
			}
		case f[0] == "unprofile" && prof != nil:
			pprof.StopCPUProfile()
			prof.Close()
			prof = nil
		case extra != nil:
			ans = extra(sc.Text())
		}
		_ = printJSON(ans)
	}
	if prof != nil {
		pprof.StopCPUProfile()
		prof.Close()
	}
}

func printJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(os.Stdout, "%s\n", b)
	return err
}
