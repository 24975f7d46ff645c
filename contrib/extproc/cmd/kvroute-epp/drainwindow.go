package main

import "github.com/kvroute/kvroute/telemetry"

// drainClock times --drain-timeout's window; tests replace it with a
// telemetry.Manual clock.
var drainClock telemetry.Clock = telemetry.Wall

// drainWindow keeps the servers serving for --drain-timeout after the
// picker's health has turned NOT_SERVING, as llm-d's router EPP does after
// SIGTERM: Envoy, and the Service's endpoints, stop sending new requests
// only once they have seen it, and until then each request is served
// rather than refused. A server that fails meanwhile ends the window; its
// error is returned with pending, the serve results still to come on
// errc, one fewer.
func (l *llmdServerFlags) drainWindow(errc chan error, pending int) (int, error) {
	if l.drainTimeout <= 0 {
		return pending, nil
	}
	t := drainClock.NewTimer(l.drainTimeout)
	defer t.Stop()
	select {
	case <-t.C():
		return pending, nil
	case err := <-errc:
		return pending - 1, err
	}
}
