package cluster

import (
	"bufio"
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/tokenload"
)

// fakeRedis answers RESP commands as a tiny Redis would, except that it
// answers each command named in answers (in upper case) with its reply
// there, such as a reply of the wrong shape (a broken server or proxy). It
// returns its address, how many SUBSCRIBEs it got, and its stop.
func fakeRedis(t *testing.T, answers map[string]string) (string, func() int, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	subs := 0
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				rd := bufio.NewReader(c)
				for {
					args, err := readCommand(rd)
					if err != nil {
						return
					}
					var out string
					cmd := strings.ToUpper(args[0])
					if cmd == "SUBSCRIBE" || cmd == "SSUBSCRIBE" {
						mu.Lock()
						subs++
						mu.Unlock()
					}
					switch cmd {
					case "HELLO":
						out = "-ERR unknown command 'HELLO'\r\n"
					case "SSCAN":
						out = "*2\r\n$1\r\n0\r\n*0\r\n"
					case "SADD", "SREM", "DEL":
						out = ":1\r\n"
					case "PING":
						out = "+PONG\r\n"
					default:
						out = "+OK\r\n"
					}
					if a, ok := answers[cmd]; ok {
						out = a
					}
					if _, err := io.WriteString(c, out); err != nil {
						return
					}
				}
			}()
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			ln.Close()
			mu.Lock()
			for _, c := range conns {
				c.Close()
			}
			mu.Unlock()
			wg.Wait()
		})
	}
	t.Cleanup(stop)
	return ln.Addr().String(), func() int { mu.Lock(); defer mu.Unlock(); return subs }, stop
}

// readCommand reads one RESP command (an array of bulk strings).
func readCommand(rd *bufio.Reader) ([]string, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return nil, err
	}
	args := make([]string, n)
	for i := range args {
		if line, err = rd.ReadString('\n'); err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(line[1:]))
		if err != nil {
			return nil, err
		}
		b := make([]byte, size+2)
		if _, err := io.ReadFull(rd, b); err != nil {
			return nil, err
		}
		args[i] = string(b[:size])
	}
	return args, nil
}

// A subscription reply of the wrong shape (an empty array, a count that is
// no integer) made go-redis panic on the receiving goroutine, which killed
// the router process: a broken server or proxy could crash every replica.
// The receive loop takes such a reply as a broken connection (counted as a
// subscribe error) and opens the subscription again.
func TestMalformedSubscriptionReplyDoesNotCrash(t *testing.T) {
	for _, push := range []string{"*0\r\n", "*3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n$1\r\nx\r\n", "*3\r\n:1\r\n:2\r\n:3\r\n"} {
		t.Run(strconv.Quote(push), func(t *testing.T) {
			defer leakcheck.Check(t)()
			addr, subs, stop := fakeRedis(t, map[string]string{"SUBSCRIBE": push, "SSUBSCRIBE": push})
			defer stop()
			ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
			require.NoError(t, err)
			defer ix.Close()
			tr, err := tokenload.NewTracker(tokenload.Options{})
			require.NoError(t, err)
			cfg := Config{Addrs: []string{addr}, Pool: "d", ReplicaID: "a", Lease: 3 * time.Hour,
				RefreshPeriod: time.Hour, ReadPeriod: 20 * time.Millisecond, OpTimeout: 2 * time.Second}
			r, err := New(cfg, ix, tr, Options{})
			require.NoError(t, err)
			defer r.Close()
			require.Eventually(t, func() bool { return subs() >= 3 }, deltaWait, time.Millisecond, "subscribed again and again")
			require.Positive(t, testutil.ToFloat64(r.met.errors[opSubscribe]))
			r.Close()
		})
	}
}

// freezeProxy forwards TCP connections to addr; freeze makes every
// connection open at that moment a black hole for good (bytes either way
// are read and discarded, nothing is closed), as a Redis failover behind a
// NAT or a service IP leaves a client's established connections, while new
// connections are forwarded again.
type freezeProxy struct {
	Addr  string
	mu    sync.Mutex
	conns []*frozenPair
	ln    net.Listener
	stop  func()
}

type frozenPair struct {
	client, server net.Conn
	frozen         atomic.Bool
}

// newFreezeProxy starts the proxy; close stops it and waits for its
// goroutines.
func newFreezeProxy(t *testing.T, addr string) *freezeProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &freezeProxy{Addr: ln.Addr().String(), ln: ln}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			pair := &frozenPair{client: c, server: s}
			p.mu.Lock()
			p.conns = append(p.conns, pair)
			p.mu.Unlock()
			pipe := func(dst, src net.Conn) {
				defer wg.Done()
				buf := make([]byte, 32<<10)
				for {
					n, err := src.Read(buf)
					if err != nil {
						return
					}
					if !pair.frozen.Load() {
						if _, err := dst.Write(buf[:n]); err != nil {
							return
						}
					}
				}
			}
			wg.Add(2)
			go pipe(s, c)
			go pipe(c, s)
		}
	}()
	var once sync.Once
	p.stop = func() {
		once.Do(func() {
			ln.Close()
			p.mu.Lock()
			for _, c := range p.conns {
				c.client.Close()
				c.server.Close()
			}
			p.mu.Unlock()
			wg.Wait()
		})
	}
	t.Cleanup(p.stop)
	return p
}

func (p *freezeProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.frozen.Store(true)
	}
}

// A subscription whose connection went dead without closing (a Redis
// failover behind a NAT, a partition: no FIN, no RST) is noticed and opened
// again: the ping the receive loop sends on a quiet channel must be
// answered, and one that is not within OpTimeout means the connection is
// gone. Before, the loop only checked that the ping could be written, which
// a dead connection's socket buffer accepts, so the replica stayed on the
// dead subscription and missed every peer's decision and load change until
// the kernel gave up on the connection (about 15 minutes of retransmits).
func TestDeadSubscriptionConnectionIsReplaced(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	proxy := newFreezeProxy(t, srv.Addr)
	defer proxy.stop()
	ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	defer ix.Close()
	tr, err := tokenload.NewTracker(tokenload.Options{})
	require.NoError(t, err)
	cfg := Config{Addrs: []string{proxy.Addr}, Pool: "d", ReplicaID: "a", Lease: time.Second,
		RefreshPeriod: 50 * time.Millisecond, ReadPeriod: 50 * time.Millisecond, OpTimeout: time.Second}
	r, err := New(cfg, ix, tr, Options{})
	require.NoError(t, err)
	defer r.Close()
	acceptTestEndpoints(t, r)
	g := newGhost(t, srv.Addr)
	const ep = "10.0.0.1:8000"
	seq := uint64(1)
	g.publish(seq, delta{endpoint: ep, tokens: 1, requests: 1})
	require.Eventually(t, func() bool { return peerLoad(tr, ep)[1] > 0 }, deltaWait, time.Millisecond, "the subscription works")

	outages := testutil.ToFloat64(r.met.outages)
	proxy.freeze()
	// The pooled connections time out and are dialled again; the
	// subscription's must be too. The outage is seen by its count: the
	// degraded state itself may last less than a poll on a loaded machine.
	require.Eventually(t, func() bool { return testutil.ToFloat64(r.met.outages) > outages }, deltaWait, time.Millisecond)
	require.Eventually(t, func() bool { return !r.Degraded() }, deltaWait, time.Millisecond)
	before := peerLoad(tr, ep)[1]
	require.Eventually(t, func() bool {
		seq++
		g.publish(seq, delta{endpoint: ep, tokens: 1, requests: 1})
		return peerLoad(tr, ep)[1] > before
	}, 4*2*cfg.Lease+deltaWait, 20*time.Millisecond, "a peer's load change arrives over a new subscription")
	r.Close()
}

// An MGET answered with more values than it asked for (a broken server or
// proxy) indexed past the member list and panicked on the read's
// goroutine, which killed the router process (New's first read, on its
// caller's). The read now fails like any other Redis error: counted, and
// the replica routes on local state; LivePeers returns the error.
func TestMGETReplyOfTheWrongLengthDoesNotCrash(t *testing.T) {
	defer leakcheck.Check(t)()
	addr, _, stop := fakeRedis(t, map[string]string{
		"SSCAN":   "*2\r\n$1\r\n0\r\n*1\r\n$1\r\nb\r\n", // one peer, b
		"MGET":    "*2\r\n$-1\r\n$-1\r\n",               // two values for its one key
		"PEXPIRE": ":1\r\n",
	})
	defer stop()
	ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	defer ix.Close()
	tr, err := tokenload.NewTracker(tokenload.Options{})
	require.NoError(t, err)
	cfg := Config{Addrs: []string{addr}, Pool: "d", ReplicaID: "a", Lease: 3 * time.Hour,
		RefreshPeriod: time.Hour, ReadPeriod: time.Hour, OpTimeout: 2 * time.Second, DisableSharedDecisions: true}
	r, err := New(cfg, ix, tr, Options{})
	require.NoError(t, err)
	defer r.Close()
	require.True(t, r.Degraded())
	require.Equal(t, 1.0, testutil.ToFloat64(r.met.errors[opRead]))
	require.Zero(t, testutil.ToFloat64(r.met.errors[opRefresh]), "the refresh succeeded: only the read failed")
	require.Empty(t, r.Peers())

	_, _, err = LivePeers(context.Background(), cfg)
	require.ErrorContains(t, err, "2 values for 1 keys")
	r.Close()
}
