package kvevents

// Index sources: what an endpoint's entries were last rebuilt from (the
// source label of kvroute_kv_events_index_source_total, EndpointStatus.IndexSource).
const (
	sourceLive     = "live"            // the live stream alone (no replay, no snapshot)
	sourceReplay   = "replay"          // the engine's replay buffer, then live
	sourceSnapshot = "engine_snapshot" // the engine's snapshot, then live
	sourceResumed  = "recorded"        // a checkpoint file or peer, verified by replay, then live
)

// setSourceLocked records what the endpoint's entries were rebuilt from
// and counts the choice.
func (st *stream) setSourceLocked(src string) {
	if st.s.source == src {
		return
	}
	st.s.source = src
	st.p.snm.source(st.id, src)
}

// indexSourceLocked is EndpointStatus.IndexSource.
func (st *stream) indexSourceLocked() string {
	switch {
	case st.s.source != "":
		return st.s.source
	case st.s.has:
		return sourceLive
	}
	return ""
}
