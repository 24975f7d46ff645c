package kvroute

import (
	"github.com/kvroute/kvroute/approx"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
)

// startApprox binds the router's approximate index (Options.Approximate,
// or a disabled one that only keeps the endpoints' modes) to the router:
// an endpoint is live when its KV-event stream's state is
// kvevents.StateLive; without KV events none is.
func (r *Router) startApprox(opts Options) error {
	ix := opts.Approximate
	if ix == nil {
		var err error
		if ix, err = approx.New(approx.Config{}, approx.Options{Set: telemetry.Set{Registerer: opts.Registerer, Clock: opts.Clock}}); err != nil {
			return err
		}
	}
	var live func(string) bool
	if r.events != nil {
		pool := r.events.eventPool()
		live = func(id string) bool {
			st, ok := pool.Status(id)
			return ok && st.State == kvevents.StateLive
		}
	}
	if err := ix.Bind(approx.Binding{Live: live, BlockSize: r.cfg.BlockSize}); err != nil {
		return err
	}
	r.approx = ix
	return nil
}

// approxMatch adds, for the candidates in approximate mode, what the
// approximate index believes they hold of one prompt beyond what the index
// matched: the longer of the two prefixes counts.
func (s *Selection) approxMatch(keys []kvindex.Key) {
	st := &s.st
	st.approx = grow(st.approx, len(st.ids))
	s.r.approx.MatchCandidates(keys, st.ids, s.view, st.approx)
	for i, a := range st.approx {
		if a == 0 {
			continue
		}
		m := 0
		if i < st.match.Len() {
			m = st.match.At(i).Blocks
		}
		if a > m {
			st.blocks[i] += a - m
			st.weighted[i] += float64(a - m)
		}
	}
}

// commitMode labels the decision with the chosen endpoint's mode, counts it,
// and, in approximate mode, records the request's blocks as held by the
// endpoint from now on.
func (s *Selection) commitMode(d *Decision) {
	r, st := s.r, &s.st
	mode := approx.ModeBlind
	if s.total > 0 && s.renderErr == nil {
		mode = s.view.Mode(d.Endpoint.ID)
	}
	d.CacheMode = mode
	r.met.modes[mode].Inc()
	if mode != approx.ModeApproximate {
		return
	}
	for p := 0; p+1 < len(st.bounds); p++ {
		r.approx.Record(d.Endpoint.ID, st.keys[st.bounds[p]:st.bounds[p+1]])
	}
}
