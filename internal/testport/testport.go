package testport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Min is the lowest port Find returns: above the fixed ports kvroute and
// the systems it talks to use by default (vLLM's 8000, the KV-event ports
// 5556, 5557 and 5559, Redis's 6379), which tests and developers' own
// processes may hold.
const Min = 10000

// rangeFile holds Linux's ephemeral port range, "low\thigh".
const rangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// Linux's default ephemeral range, used where rangeFile cannot be read.
const defaultLow, defaultHigh = 32768, 60999

const (
	attempts = 1000 // draws before Find gives up
	remember = 4096 // ports Find keeps from returning again
)

// Options says which ports must be free together. The zero value asks for
// one port on 127.0.0.1.
type Options struct {
	// Hosts are the loopback addresses each port must be free on (for a
	// fleet on 127.0.0.1 and 127.0.0.2 that shares one port number); nil
	// means 127.0.0.1.
	Hosts []string
	// Offsets are added to the returned port p: every p+offset must be free
	// and below the ephemeral range (0 and 1 for a data-parallel engine's
	// two ranks; 0 and 10000 for a Redis Cluster node and its bus). Nil
	// means 0 alone. Offsets are non-negative.
	Offsets []int
}

// EphemeralRange returns the kernel's ephemeral port range, read from
// /proc/sys/net/ipv4/ip_local_port_range, or Linux's default 32768–60999
// where that file is missing or unreadable.
func EphemeralRange() (low, high int) {
	r := ephemeral()
	return r[0], r[1]
}

var ephemeral = sync.OnceValue(func() [2]int {
	b, err := os.ReadFile(rangeFile)
	if err != nil {
		return [2]int{defaultLow, defaultHigh}
	}
	low, high, err := parseRange(string(b))
	if err != nil {
		return [2]int{defaultLow, defaultHigh}
	}
	return [2]int{low, high}
})

// parseRange reads rangeFile's "low high".
func parseRange(s string) (low, high int, err error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("testport: port range %q: want two numbers", s)
	}
	if low, err = strconv.Atoi(f[0]); err != nil {
		return 0, 0, fmt.Errorf("testport: port range %q: %w", s, err)
	}
	if high, err = strconv.Atoi(f[1]); err != nil {
		return 0, 0, fmt.Errorf("testport: port range %q: %w", s, err)
	}
	if low < 1 || high > 65535 || low > high {
		return 0, 0, fmt.Errorf("testport: port range %q out of order", s)
	}
	return low, high, nil
}

// std is the process's finder: every test of a binary shares it, so no two
// of them get the same port.
var std = &finder{low: func() int { low, _ := EphemeralRange(); return low }, draw: rand.IntN}

// Find returns a port p outside the ephemeral range such that p+offset was
// free on every host of o, for every offset, when Find bound and closed it;
// nothing holds it afterwards (see the package comment for what that
// promises). It fails when o leaves no room below the range, or when no
// draw was free after many tries.
func Find(o Options) (int, error) { return std.find(o) }

// Port returns a port on 127.0.0.1 outside the ephemeral range that was
// free when checked, failing t when there is none.
func Port(t testing.TB) int {
	t.Helper()
	p, err := Find(Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Addr returns "127.0.0.1:port" for a port from Port.
func Addr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(Port(t)))
}

// finder draws ports and remembers the last ones it returned.
type finder struct {
	low  func() int      // the ephemeral range's low end
	draw func(n int) int // a random number in [0, n)
	// bind is listen's net.Listen; nil means net.Listen.
	bind func(network, addr string) (net.Listener, error)

	mu    sync.Mutex
	given map[int]bool
	order []int // given's ports, oldest first, at most remember
}

func (f *finder) find(o Options) (int, error) {
	hosts, offsets := o.Hosts, o.Offsets
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1"}
	}
	if len(offsets) == 0 {
		offsets = []int{0}
	}
	top := 0
	for _, off := range offsets {
		if off < 0 {
			return 0, fmt.Errorf("testport: offset %d is negative", off)
		}
		top = max(top, off)
	}
	low := f.low()
	hi := low - 1 - top // the highest p whose every p+offset is below the range
	if hi < Min {
		return 0, fmt.Errorf("testport: no port p in %d..%d with p+%d below the ephemeral range (from %d)", Min, low-1, top, low)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var last error
	for range attempts {
		p := Min + f.draw(hi-Min+1)
		if f.takenLocked(p, offsets) {
			continue
		}
		if last = bindAll(p, hosts, offsets); last != nil {
			continue
		}
		f.giveLocked(p, offsets)
		return p, nil
	}
	if last == nil {
		last = errors.New("every draw was a port already returned")
	}
	return 0, fmt.Errorf("testport: no free port in %d..%d after %d draws: %w", Min, hi, attempts, last)
}

// takenLocked reports whether a port p+offset was returned lately.
func (f *finder) takenLocked(p int, offsets []int) bool {
	for _, off := range offsets {
		if f.given[p+off] {
			return true
		}
	}
	return false
}

// giveLocked remembers the ports p+offset, forgetting the oldest beyond
// remember.
func (f *finder) giveLocked(p int, offsets []int) {
	if f.given == nil {
		f.given = map[int]bool{}
	}
	for _, off := range offsets {
		if f.given[p+off] {
			continue
		}
		f.given[p+off] = true
		f.order = append(f.order, p+off)
	}
	for len(f.order) > remember {
		delete(f.given, f.order[0])
		f.order = f.order[1:]
	}
}

// bindAll binds p+offset on every host, holding each until all are bound,
// then closes them.
func bindAll(p int, hosts []string, offsets []int) error {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	for _, h := range hosts {
		for _, off := range offsets {
			l, err := net.Listen("tcp", net.JoinHostPort(h, strconv.Itoa(p+off)))
			if err != nil {
				return err
			}
			held = append(held, l)
		}
	}
	return nil
}
