package gateway

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// mux routes /metrics, /health and everything else to the Handler, counting
// requests in flight so that Shutdown can wait for them. A request with a
// body gets Proxy.BodyReadTimeout as its read deadline before any handler
// answers: net/http discards the unread body of an answer (up to 256 KiB)
// before writing it, and a body that does not come by then fails the
// discard and closes the connection instead of holding it. The Handler's
// body read sets the deadline again and clears it after a complete body, so
// that it does not cut the response.
func (s *Server) mux() http.Handler {
	m := http.NewServeMux()
	m.Handle("/metrics", s.readOnly("/metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	})))
	m.Handle("/health", s.readOnly("/health", http.HandlerFunc(s.health)))
	m.Handle("/ready", s.readOnly("/ready", http.HandlerFunc(s.readyz)))
	m.Handle(StatusPath, s.readOnly(StatusPath, http.HandlerFunc(s.status)))
	m.Handle("/", s.handler)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.handlers.Add(1)
		defer s.handlers.Done()
		if r.ContentLength != 0 {
			// A socket deadline, handed to the OS: wall time.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.handler.cfg.BodyReadTimeout))
		}
		m.ServeHTTP(w, r)
	})
}

// readOnly serves path (one of methodPaths) with next to GET and HEAD and
// answers any other method 405 with Allow (Handler.readOnly).
func (s *Server) readOnly(path string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.handler.readOnly(w, r, path) {
			next.ServeHTTP(w, r)
		}
	})
}

// health answers 200 while the gateway has endpoints and 503 otherwise.
func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	n := len(*s.handler.endpoints.Load())
	w.Header().Set("Content-Type", "application/json")
	if n == 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintln(w, `{"status":"no endpoints","endpoints":0}`)
		return
	}
	_, _ = fmt.Fprintf(w, "{\"status\":\"ok\",\"endpoints\":%d}\n", n)
}
