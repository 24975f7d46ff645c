package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/gateway"
	"github.com/kvroute/kvroute/telemetry"
)

// ErrNoRedis is returned by RunReplicas when no redis-server is on PATH.
var ErrNoRedis = errors.New("--replicas needs redis-server on PATH (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis)")

// ReplicasReport is what RunReplicas measured.
type ReplicasReport struct {
	// Gateways are the two gateways' URLs: the in-process one first, then
	// the child process the demo kills.
	Gateways [2]string
	// Routed counts the burst's requests per engine; ByGateway per gateway
	// URL.
	Routed    map[string]int
	ByGateway map[string]int
	// PeerRequests is the open requests the surviving gateway saw from the
	// other one before the kill; PeerLoadGone how long after the kill its
	// view dropped them (within the lease plus a read period).
	PeerRequests int64
	PeerLoadGone time.Duration
	// After counts the requests the surviving gateway served after the kill.
	After int
}

// RunReplicas is the demo with --replicas 2: it starts its own redis-server
// on a free loopback port, the simulated engines, and two gateways sharing
// load and routing decisions through that Redis (the cluster option): one in
// this process, one a child process (this program re-executed). It sends a
// burst of one new prefix round-robin over both gateways, faster than an
// engine prefills it, so that only the shared decisions can keep it on one
// engine; then it opens long streams through the child, kills the child
// with SIGKILL, and shows the surviving gateway's load view dropping the
// dead replica's load when its lease expires while it goes on routing. It
// stops every process it started before returning.
func RunReplicas(ctx context.Context, o Options, w io.Writer) (*ReplicasReport, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	redisBin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNoRedis
	}
	rep := &ReplicasReport{Routed: map[string]int{}, ByGateway: map[string]int{}}
	fmt.Fprintf(w, "kvroute demo, two gateway replicas: %d simulated vLLM engines, a redis-server and two gateways sharing state through it\n", o.Engines)

	rs, err := startRedis(ctx, redisBin)
	if err != nil {
		return rep, err
	}
	defer rs.stop()
	fmt.Fprintf(w, "  redis    %s  (%s, pid %d)\n", rs.addr, redisBin, rs.cmd.Process.Pid)

	var engines []*simEngine
	defer func() {
		for _, e := range engines {
			_ = e.srv.Close()
			<-e.served
		}
	}()
	for range o.Engines {
		e, err := startEngine(o)
		if err != nil {
			return rep, err
		}
		engines = append(engines, e)
		fmt.Fprintf(w, "  engine   %s\n", e.url)
	}
	c := &cluster{engines: engines}
	spec := gatewaySpec{Redis: rs.addr, Model: o.Model, BlockSize: o.BlockSize, Endpoints: c.endpoints()}

	spec.ReplicaID = "gw-1"
	gw1, err := gateway.NewServer(ctx, spec.serverConfig(), gateway.Options{Set: telemetry.Set{Logger: o.Logger}})
	if err != nil {
		return rep, fmt.Errorf("gateway gw-1: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = gw1.Shutdown(sctx)
	}()
	spec.ReplicaID = "gw-2"
	child, err := startChildGateway(ctx, spec)
	if err != nil {
		return rep, fmt.Errorf("gateway gw-2: %w", err)
	}
	defer child.stop()
	rep.Gateways = [2]string{gw1.URL(), child.url}
	fmt.Fprintf(w, "  gateway  %s  gw-1, in this process\n", gw1.URL())
	fmt.Fprintf(w, "  gateway  %s  gw-2, child process pid %d\n", child.url, child.cmd.Process.Pid)

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer client.CloseIdleConnections()
	router := gw1.Router()
	section(w, "1. Both gateways ready and in one pool")
	if err := waitFor(ctx, 20*time.Second, func() bool {
		return ready(ctx, client, gw1.URL()) && ready(ctx, client, child.url) && len(router.Cluster().Peers()) == 1
	}); err != nil {
		return rep, fmt.Errorf("the gateways did not become ready and see each other: %w", err)
	}
	fmt.Fprintf(w, "  gw-1 sees its peer %s; staleness bound of the shared load %v, lease %v\n",
		router.Cluster().Peers()[0].ID, router.Cluster().StalenessBound(), demoLease)

	gws := rep.Gateways[:]
	const gap = 20 * time.Millisecond
	section(w, fmt.Sprintf("2. %d requests of one new %d-token prefix, round-robin over both gateways, %v apart", o.BurstRequests, o.PrefixTokens, gap))
	fmt.Fprintf(w, "  (an engine needs about %v to prefill it, so its KV events come too late: only the shared decisions keep the burst together)\n",
		(time.Duration(float64(o.PrefixTokens)/o.PrefillTokensPerSecond*1e9) * time.Nanosecond).Round(time.Millisecond))
	system := document(7, o.PrefixTokens)
	var wg sync.WaitGroup
	errs := make(chan error, o.BurstRequests)
	var mu sync.Mutex
	for i := range o.BurstRequests {
		switch {
		case i == 1:
			// The first decision must have reached gw-2 before gw-2 routes
			// the same prefix: wait for the event (a pub/sub hop, a few ms
			// on an idle machine) rather than trusting the pacing, which a
			// loaded machine stretches.
			start := time.Now()
			if err := waitFor(ctx, 20*time.Second, func() bool {
				m, err := Scrape(ctx, client, gws[1])
				return err == nil && m.Sum("kvroute_cluster_decisions_applied_total") >= 1
			}); err != nil {
				return rep, fmt.Errorf("gw-2 never applied gw-1's first decision: %w", err)
			}
			mu.Lock() // request 1's goroutine may be writing its line
			fmt.Fprintf(w, "  gw-2 applied gw-1's decision for request 1 (seen %v after it was sent)\n", time.Since(start).Round(time.Millisecond))
			mu.Unlock()
		case i > 1:
			time.Sleep(gap) // pacing the burst, not synchronizing
		}
		gw := gws[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := send(ctx, client, gw+"/v1/chat/completions", chatBody(o.Model, system, question(i), 8, false))
			if err == nil && r.Status != http.StatusOK {
				err = fmt.Errorf("%s: status %d", gw, r.Status)
			}
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			defer mu.Unlock()
			rep.Routed[r.Endpoint]++
			rep.ByGateway[gw]++
			fmt.Fprintf(w, "  request %2d via %s -> %s\n", i+1, gw, r.Endpoint)
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return rep, fmt.Errorf("burst: %w", err)
	}
	top, n := "", 0
	for ep, k := range rep.Routed {
		if k > n {
			top, n = ep, k
		}
	}
	if float64(n) < burstMinShare*float64(o.BurstRequests) {
		return rep, fmt.Errorf("the burst split over the engines across the two gateways: %v", rep.Routed)
	}
	fmt.Fprintf(w, "  PASS: %d of %d requests, from both gateways, went to %s\n", n, o.BurstRequests, top)

	section(w, "3. Kill gw-2 with SIGKILL while it carries open streams; gw-1 carries on")
	const streams = 4
	sctx, cancelStreams := context.WithCancel(ctx)
	started := make(chan struct{}, streams)
	var swg sync.WaitGroup
	defer func() { cancelStreams(); swg.Wait() }()
	for i := range streams {
		swg.Add(1)
		go func() {
			defer swg.Done()
			openStream(sctx, client, child.url, o.Model, question(100+i), started)
		}()
	}
	peerRequests := func() int64 {
		var sum int64
		for _, e := range engines {
			sum += router.Load().PeerLoadOf(e.id).Requests
		}
		return sum
	}
	for range streams {
		select {
		case <-started:
		case <-time.After(20 * time.Second):
			return rep, errors.New("the streams through gw-2 did not start")
		}
	}
	if err := waitFor(ctx, 10*time.Second, func() bool { return peerRequests() == streams }); err != nil {
		return rep, fmt.Errorf("gw-1 did not see gw-2's %d open streams (sees %d): %w", streams, peerRequests(), err)
	}
	rep.PeerRequests = peerRequests()
	fmt.Fprintf(w, "  gw-1's load view: %d open requests of its own, %d of gw-2\n", localRequests(router, engines), rep.PeerRequests)
	killed := time.Now()
	if err := child.kill(); err != nil {
		return rep, err
	}
	fmt.Fprintf(w, "  gw-2 (pid %d) killed with SIGKILL: it decrements nothing and deletes nothing\n", child.cmd.Process.Pid)
	if err := waitFor(ctx, demoLease+10*time.Second, func() bool { return peerRequests() == 0 }); err != nil {
		return rep, fmt.Errorf("gw-2's load stayed in gw-1's view: %w", err)
	}
	rep.PeerLoadGone = time.Since(killed)
	cancelStreams()
	fmt.Fprintf(w, "  gw-1 dropped gw-2's %d requests %v after the kill (lease %v + read period %v), peers now %d\n",
		rep.PeerRequests, rep.PeerLoadGone.Round(10*time.Millisecond), demoLease, demoRead, len(router.Cluster().Peers()))
	for i := range 3 {
		r, err := send(ctx, client, gw1.URL()+"/v1/chat/completions", chatBody(o.Model, system, question(200+i), 8, false))
		if err != nil || r.Status != http.StatusOK {
			return rep, fmt.Errorf("gw-1 after the kill: status %d: %v", r.Status, err)
		}
		rep.After++
		fmt.Fprintf(w, "  request via gw-1 -> %s  (%d of %d prompt tokens predicted cached)\n", r.Endpoint, r.CachedTokens, r.PromptTokens)
	}
	fmt.Fprintln(w, "  PASS: gw-1 carries on alone")
	return rep, nil
}

// localRequests is the open requests a router dispatched itself.
func localRequests(r *kvroute.Router, engines []*simEngine) int64 {
	var sum int64
	for _, e := range engines {
		_, req := r.Load().LocalLoad(e.id)
		sum += req
	}
	return sum
}

// waitFor polls cond every 20 ms until it holds, limit passes or ctx ends.
func waitFor(ctx context.Context, limit time.Duration, cond func() bool) error {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("not within %v", limit)
		case <-tick.C:
		}
	}
	return nil
}

// ready reports whether a gateway's /ready answers 200.
func ready(ctx context.Context, client *http.Client, base string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/ready", nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// openStream sends a streaming chat request with a long answer and reads it
// until ctx ends or the gateway goes away; started is signalled at the
// first event.
func openStream(ctx context.Context, client *http.Client, base, model, q string, started chan<- struct{}) {
	b, _ := json.Marshal(chatBody(model, "You answer at length.", q, 1500, true)) // 15 s of decode at 10 ms a step: open well past the kill
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(string(b)))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	signalled := false
	for {
		line, err := br.ReadString('\n')
		if !signalled && strings.HasPrefix(line, "data:") {
			started <- struct{}{}
			signalled = true
		}
		if err != nil {
			return
		}
	}
}

// redisServer is the demo's own redis-server.
type redisServer struct {
	cmd  *exec.Cmd
	addr string
	dir  string
	done chan struct{}
}

// errRedisExited is a redis-server that exited before it answered: most
// often another process took the free port between our probe and its bind.
var errRedisExited = errors.New("redis-server exited at start (port taken?)")

// startRedis runs redis-server on a free loopback port (never 6379), with
// no persistence, and waits until it answers PING. The port is free when it
// is chosen, not when redis-server binds it, so a server that exits at start
// is tried again on another port, a few times.
func startRedis(ctx context.Context, bin string) (*redisServer, error) {
	var err error
	for range 5 {
		var s *redisServer
		if s, err = startRedisOnce(ctx, bin); !errors.Is(err, errRedisExited) {
			return s, err
		}
	}
	return nil, err
}

// startRedisOnce is one attempt of startRedis.
func startRedisOnce(ctx context.Context, bin string) (*redisServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir, err := os.MkdirTemp("", "kvroute-demo-redis-")
	if err != nil {
		return nil, err
	}
	s := &redisServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, done: make(chan struct{})}
	s.cmd = exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--daemonize", "no", "--loglevel", "warning")
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("redis-server: %w", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	rdb := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer rdb.Close()
	err = waitFor(ctx, 10*time.Second, func() bool {
		select {
		case <-s.done:
			return true
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return rdb.Ping(pctx).Err() == nil
	})
	select {
	case <-s.done:
		err = errRedisExited
	default:
	}
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("redis-server on %s: %w", s.addr, err)
	}
	return s, nil
}

func (s *redisServer) stop() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	os.RemoveAll(s.dir)
}

// childGateway is the gateway the demo runs as a child process.
type childGateway struct {
	cmd   *exec.Cmd
	url   string
	stdin io.WriteCloser
	done  chan struct{}
}

// startChildGateway re-executes this program as a replica gateway and reads
// its URL from its first line of output.
func startChildGateway(ctx context.Context, spec gatewaySpec) (*childGateway, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	g := &childGateway{cmd: exec.Command(self), done: make(chan struct{})}
	g.cmd.Env = append(os.Environ(), envReplicaGateway+"="+string(js))
	g.cmd.Stderr = os.Stderr
	if g.stdin, err = g.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := g.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := g.cmd.Start(); err != nil {
		return nil, err
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		first := true
		for sc.Scan() { // drain until the child exits
			if first {
				lines <- sc.Text()
				first = false
			}
		}
		if first {
			lines <- ""
		}
		_ = g.cmd.Wait()
		close(g.done)
	}()
	select {
	case line := <-lines:
		if url, ok := strings.CutPrefix(line, "listening "); ok {
			g.url = url
			return g, nil
		}
		g.stop()
		return nil, fmt.Errorf("child gateway said %q", line)
	case <-time.After(30 * time.Second):
		g.stop()
		return nil, errors.New("child gateway did not start within 30s")
	case <-ctx.Done():
		g.stop()
		return nil, ctx.Err()
	}
}

// kill sends SIGKILL and waits for the process to end.
func (g *childGateway) kill() error {
	if err := g.cmd.Process.Kill(); err != nil {
		return err
	}
	<-g.done
	return nil
}

// stop ends the child if it still runs and waits for it.
func (g *childGateway) stop() {
	_ = g.stdin.Close()
	select {
	case <-g.done:
		return
	case <-time.After(5 * time.Second):
	}
	_ = g.cmd.Process.Kill()
	<-g.done
}
