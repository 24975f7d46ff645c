package leakcheck

import (
	"time"

	"go.uber.org/goleak"
)

// TB is the part of testing.TB that Check needs.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
}

// Timeout bounds how long the returned function waits for goroutines to exit.
// It is generous: on a loaded 2-core machine a closed component's goroutines
// may take a while to be scheduled and return.
var Timeout = 10 * time.Second

// ignored are goroutines that never count as leaks, on top of goleak's own
// (the runtime's and the testing package's).
var ignored = []goleak.Option{
	// Idle keep-alive connections of http.DefaultTransport (httptest
	// clients) live on until the transport closes them.
	goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
	goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	goleak.IgnoreAnyFunction("os/signal.signal_recv"),
	goleak.IgnoreAnyFunction("os/signal.loop"),
}

// Check snapshots the running goroutines and returns a function that fails t
// if goroutines started after the snapshot are still running Timeout later.
// The failure lists their stacks.
func Check(t TB) func() {
	opts := append([]goleak.Option{goleak.IgnoreCurrent()}, ignored...)
	return func() {
		t.Helper()
		// Each Find retries with backoff for a fraction of a second; repeat it
		// until the deadline so that slow exits on a loaded machine pass.
		deadline := time.Now().Add(Timeout)
		for {
			err := goleak.Find(opts...)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("leakcheck: goroutines still running after %v: %v", Timeout, err)
				return
			}
		}
	}
}
