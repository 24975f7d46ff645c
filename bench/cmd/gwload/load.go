package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Phases of a closed-loop run.
const (
	phaseWarmup  = iota // requests are sent, not recorded
	phaseMeasure        // requests that start and end in it are recorded
	phaseStop           // workers return after their current request
)

// loadResult is what one closed-loop run measured in its window.
type loadResult struct {
	Requests int
	Errors   int
	Window   time.Duration
	P50, P99 time.Duration
}

// RPS returns the requests completed per second of the window.
func (r loadResult) RPS() float64 { return float64(r.Requests) / r.Window.Seconds() }

// prompt returns a prompt of prefixWords shared words (one simulated token
// each) followed by a suffix unique to the request.
func sharedPrefix(words int) string {
	var b strings.Builder
	for i := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("w")
		b.WriteString(strconv.Itoa(i))
	}
	return b.String()
}

// loadGen is a closed-loop load generator: each of its workers sends one
// request, waits for the whole response, and sends the next.
type loadGen struct {
	client *http.Client
	model  string
	prefix string
}

func newLoadGen(model string, prefixWords, maxConns int) *loadGen {
	return &loadGen{
		client: &http.Client{Transport: &http.Transport{
			MaxIdleConnsPerHost: maxConns, DisableCompression: true, IdleConnTimeout: time.Minute,
		}},
		model:  model,
		prefix: sharedPrefix(prefixWords),
	}
}

func (g *loadGen) close() { g.client.CloseIdleConnections() }

// body returns a completions body: the shared prefix, a unique suffix, one
// output token.
func (g *loadGen) body(worker, i int) []byte {
	return fmt.Appendf(nil, `{"model":%q,"prompt":"%s u%dr%d","max_tokens":1}`, g.model, g.prefix, worker, i)
}

// maxWindowStretch bounds how long a window that has seen no request
// complete is held open past its length.
const maxWindowStretch = time.Minute

// run drives conc workers against targets (base URLs, taken in turn) for
// warmup, then measures for window; around the window it calls mark (at
// the start and at the end) so that the caller can sample CPU counters. A
// window in which no request has completed yet (a slow first request on a
// loaded machine) stays open until one does, for at most
// maxWindowStretch more: a window that measured nothing has no rate, and
// the report divides by the window's real length.
func (g *loadGen) run(targets []string, conc int, warmup, window time.Duration, mark func(start bool)) loadResult {
	var (
		phase  atomic.Int32
		errs   atomic.Int64
		wg     sync.WaitGroup
		mu     sync.Mutex
		lat    []time.Duration
		cursor atomic.Uint64
		first  = make(chan struct{}) // closed at the window's first completion
		once   sync.Once
	)
	for w := range conc {
		wg.Go(func() {
			var mine []time.Duration
			for i := 0; phase.Load() != phaseStop; i++ {
				url := targets[(cursor.Add(1)-1)%uint64(len(targets))] + "/v1/completions"
				p0 := phase.Load()
				t0 := time.Now()
				ok := g.post(url, g.body(w, i))
				d := time.Since(t0)
				if p0 == phaseMeasure && phase.Load() == phaseMeasure {
					once.Do(func() { close(first) })
					if ok {
						mine = append(mine, d)
					} else {
						errs.Add(1)
					}
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	time.Sleep(warmup) // the load runs meanwhile; nothing waits on it
	mark(true)
	t0 := time.Now()
	phase.Store(phaseMeasure)
	time.Sleep(window)
	stretch := time.NewTimer(maxWindowStretch)
	select {
	case <-first:
	case <-stretch.C:
	}
	stretch.Stop()
	phase.Store(phaseStop)
	mark(false)
	elapsed := time.Since(t0)
	wg.Wait()
	slices.Sort(lat)
	res := loadResult{Requests: len(lat), Errors: int(errs.Load()), Window: elapsed}
	if len(lat) > 0 {
		res.P50 = lat[len(lat)*50/100]
		res.P99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return res
}

// post sends one request and reads the whole response; it reports whether
// the answer was a 200.
func (g *loadGen) post(url string, body []byte) bool {
	resp, err := g.client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return false
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err == nil && resp.StatusCode == http.StatusOK
}

// timeWaitTo counts the IPv4 TCP sockets in TIME_WAIT whose local or remote
// address (IP and port) is one of addrs, the engines' "ip:port": connections
// to the engines that were closed (the side that closes first keeps
// TIME_WAIT for a minute). Matching the whole address, not the port alone,
// keeps out other processes' connections to the same port number on another
// loopback address.
func timeWaitTo(addrs map[string]bool) int {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return -1
	}
	n := 0
	for i, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 4 || f[3] != "06" { // 06: TCP_TIME_WAIT
			continue
		}
		if addrs[procAddr(f[1])] || addrs[procAddr(f[2])] {
			n++
		}
	}
	return n
}

// procAddr turns a /proc/net/tcp address such as "0100007F:1F90" into
// "127.0.0.1:8080" ("" when it is not one): the kernel prints the IPv4
// address as the hexadecimal of its four network-order bytes read as a
// native-endian word, and the port in hexadecimal.
func procAddr(a string) string {
	h, p, ok := strings.Cut(a, ":")
	if !ok || len(h) != 8 {
		return ""
	}
	v, err := strconv.ParseUint(h, 16, 32)
	if err != nil {
		return ""
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return ""
	}
	var ip [4]byte
	binary.NativeEndian.PutUint32(ip[:], uint32(v))
	return net.JoinHostPort(net.IP(ip[:]).String(), strconv.FormatUint(port, 10))
}
