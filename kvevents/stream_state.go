package kvevents

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// StreamState is an endpoint's event stream as readiness sees it: whether
// the index holds what the engine published.
type StreamState string

// The stream states.
const (
	// StateConnecting: subscribed (or waiting for the subscription or, in
	// bind mode, the first message) and not caught up yet.
	StateConnecting StreamState = "connecting"
	// StateReplaying: a replay is filling the index.
	StateReplaying StreamState = "replaying"
	// StateLive: connected and caught up: a batch was applied or a replay
	// completed (an idle engine's empty buffer counts), and nothing is known
	// to be missing.
	StateLive StreamState = "live"
	// StateDegraded: the index may be stale: a gap no replay could repair
	// (no replay address), a replay that gave up with sequences it knew
	// were published still missing (until a repair fills them), or the
	// subscription of a stream that was live is down (connection or
	// heartbeat lost) and reconnecting; in bind mode, the engine connection
	// that owned the endpoint was lost and no other has claimed it yet.
	StateDegraded StreamState = "degraded"
)

// streamStates lists the states, the state label values of
// kvroute_kv_events_stream_state.
var streamStates = []StreamState{StateConnecting, StateReplaying, StateLive, StateDegraded}

// lastApplied is when the stream last applied a batch (zero: never).
func (st *stream) lastApplied() time.Time {
	if ns := st.lastApply.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// stateCollector exports every endpoint's stream state and the time since
// its last applied batch, read from Pool.Statuses at scrape time: one view
// of the endpoint set, so a scrape during an endpoint swap (Ensure of the
// new one, then Remove of the old) shows at least one of the two, where
// listing the IDs first and then reading each one's status could show
// neither.
type stateCollector struct {
	p     *Pool
	now   func() time.Time
	state *prometheus.Desc
	since *prometheus.Desc
}

// NewStateCollector returns a collector of p's per-endpoint readiness:
// kvroute_kv_events_stream_state{pod_identifier, state} (1 for the current
// state, 0 for the others) and
// kvroute_kv_events_seconds_since_last_applied{pod_identifier} (for
// endpoints that applied a batch). Register it next to the pool's metrics;
// now nil is time.Now.
func NewStateCollector(p *Pool, now func() time.Time) prometheus.Collector {
	if now == nil {
		now = time.Now
	}
	return &stateCollector{p: p, now: now,
		state: prometheus.NewDesc("kvroute_kv_events_stream_state",
			"Per-endpoint KV-event stream state (1 for the current one): connecting, replaying, live, degraded.",
			[]string{"pod_identifier", "state"}, nil),
		since: prometheus.NewDesc("kvroute_kv_events_seconds_since_last_applied",
			"Seconds since the endpoint's last KV-event batch was applied to the index (an idle engine publishes nothing, so this grows while it idles).",
			[]string{"pod_identifier"}, nil),
	}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.state
	ch <- c.since
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.now()
	for _, st := range c.p.Statuses() {
		id := st.ID
		for _, s := range streamStates {
			v := 0.0
			if s == st.State {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, v, id, string(s))
		}
		if !st.LastApplied.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.since, prometheus.GaugeValue, now.Sub(st.LastApplied).Seconds(), id)
		}
	}
}
