package gateway

import (
	"context"
	"errors"
	"net/http"
)

// Done is closed once the Server has stopped serving: after Shutdown, or as
// soon as its listener fails on its own (Err says why), so that whatever
// runs the gateway can stop instead of staying up with nothing served. The
// failure is also logged at Error.
func (s *Server) Done() <-chan struct{} { return s.stopped }

// Err returns why the Server stopped serving: the listener's error when it
// failed on its own, nil after Shutdown or while it still serves.
func (s *Server) Err() error {
	select {
	case <-s.stopped:
		if errors.Is(s.serveErr, http.ErrServerClosed) {
			return nil
		}
		return s.serveErr
	default:
		return nil
	}
}

// Drain begins a graceful stop without refusing anything: from now on, for
// good, /ready answers 503 with the reason "shutting down" and each
// connection is closed after the response it is serving (idle ones at
// once). A Kubernetes Service or load balancer that probes /ready stops
// sending new requests here, and a client on a persistent connection
// reconnects and lands on another replica, while every request that still
// arrives is served. Shutdown, later, stops accepting. A host calls Drain on
// SIGTERM and waits a drain window (kvroute-gateway's --drain-timeout)
// before Shutdown: a Service keeps sending a terminating pod traffic until
// its endpoints update, and without the window those requests are refused.
// Drain may be called more than once, concurrently with requests.
func (s *Server) Drain() {
	if s.draining.CompareAndSwap(false, true) {
		s.srv.SetKeepAlivesEnabled(false)
	}
}

// Shutdown stops the server gracefully: it stops accepting, waits for the
// requests in flight until ctx ends, then cuts the remaining connections
// (their requests see a cancelled context, so each Decision is Done), waits
// for every handler to return and closes the router. Later calls return the
// first call's result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() {
		// Requests still queued by the admission are answered 503 (closed,
		// with Retry-After) rather than holding the shutdown for their
		// queue timeouts.
		s.closeAdmission()
		if s.models != nil {
			s.models.Close() // its poller calls SetEndpoints: stopped before the router closes
		}
		err := s.srv.Shutdown(ctx)
		if err != nil {
			err = errors.Join(err, s.srv.Close())
		}
		<-s.stopped
		if serr := s.Err(); serr != nil {
			err = errors.Join(err, serr)
		}
		s.handlers.Wait()
		s.handler.Close()
		if s.router != nil {
			s.router.Close()
		}
		if s.session != nil {
			s.session.Close() // after the router: no pick records a session any more
		}
		s.shutdownErr = err
	})
	return s.shutdownErr
}

// closeAdmission closes the admission stage, the lora scorer and the
// engine scraper, those that exist.
func (s *Server) closeAdmission() {
	s.peers.close() // reads the scraper: stopped first
	if s.admission != nil {
		s.admission.Close()
	}
	if s.lora != nil {
		s.lora.Close()
	}
	if s.scraper != nil {
		s.scraper.Close()
	}
	if s.disagg != nil {
		s.disagg.Close()
	}
}
