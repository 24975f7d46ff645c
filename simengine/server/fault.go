package server

import (
	"fmt"
	"net/http"
	"strconv"
)

// SuppressKVEventsPath is the simulated engine's fault-injection route (no
// vLLM counterpart): POST it with ?on=true to stop publishing KV events
// without a sequence gap (see EventPublisher.Suppress) and ?on=false to
// resume. It exists only when KV events are active.
const SuppressKVEventsPath = "/sim/suppress_kv_events"

func (s *Server) handleSuppress(w http.ResponseWriter, r *http.Request) {
	on, err := strconv.ParseBool(r.URL.Query().Get("on"))
	if err != nil {
		writeDetail(w, http.StatusBadRequest, "on must be true or false")
		return
	}
	s.pub.Suppress(on)
	s.lg.Warn("simengine: KV-event suppression (fault injection)", "on", on)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, "{\"suppressed\":%t,\"dropped_batches\":%d}\n", on, s.pub.Suppressed())
}
