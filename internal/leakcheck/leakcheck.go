package leakcheck

import (
	"bytes"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// TB is the part of testing.TB that Check needs.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
}

// Timeout bounds how long the returned function waits for goroutines to exit.
var Timeout = 10 * time.Second

// ignored lists substrings of goroutine stacks that never count as leaks.
var ignored = []string{
	"testing.(*T).Run",
	"testing.(*M).",
	"testing.tRunner",
	"testing.runTests",
	"testing.(*F).",
	"runtime.goexit0",
	"os/signal.signal_recv",
	"os/signal.loop",
	"runtime.ensureSigM",
	"net/http.(*persistConn).readLoop", // idle keep-alive conns of http.DefaultTransport
	"net/http.(*persistConn).writeLoop",
}

// Check snapshots the running goroutines and returns a function that fails t if
// goroutines started after the snapshot are still running Timeout later.
func Check(t TB) func() {
	before := ids()
	return func() {
		t.Helper()
		deadline := time.Now().Add(Timeout)
		var leaked []string
		for {
			leaked = leaked[:0]
			for id, stack := range goroutines() {
				if _, ok := before[id]; ok || isIgnored(stack) {
					continue
				}
				leaked = append(leaked, stack)
			}
			if len(leaked) == 0 {
				return
			}
			if time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Errorf("leakcheck: %d goroutine(s) still running after %v:\n\n%s",
			len(leaked), Timeout, strings.Join(leaked, "\n\n"))
	}
}

// Count returns the number of goroutines that would count as leaks relative to
// an empty snapshot; useful for coarse assertions in long loops.
func Count() int {
	n := 0
	for _, s := range goroutines() {
		if !isIgnored(s) {
			n++
		}
	}
	return n
}

func isIgnored(stack string) bool {
	for _, s := range ignored {
		if strings.Contains(stack, s) {
			return true
		}
	}
	return false
}

func ids() map[int]struct{} {
	m := map[int]struct{}{}
	for id := range goroutines() {
		m[id] = struct{}{}
	}
	return m
}

func goroutines() map[int]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[int]string{}
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		s := string(g)
		if !strings.HasPrefix(s, "goroutine ") {
			continue
		}
		rest := s[len("goroutine "):]
		sp := strings.IndexByte(rest, ' ')
		if sp < 0 {
			continue
		}
		id, err := strconv.Atoi(rest[:sp])
		if err != nil {
			continue
		}
		out[id] = s
	}
	return out
}
