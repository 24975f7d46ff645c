package kvroute

import (
	"slices"
	"sync/atomic"

	"github.com/kvroute/kvroute/approx"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/tokenload"
)

// Fallback endpoints: a request that asks for them (Request.Fallbacks) gets,
// besides its pick, the next best candidates in order, for a gateway that
// retries down the list when the pick fails (Envoy with the Inference
// Extension's endpoint list). When the gateway reports that a fallback
// served the request (Decision.Served), the request's load moves there.

// fallbacks ranks up to s.req.Fallbacks candidates other than chosen, best
// first: the candidates the filters kept by their total score, then those
// only the affinity filter dropped (they lack the cache, not the right to
// serve) by the score the scorers give them. Ties keep the candidates'
// order. Nil when the request asked for none or the stages did not score.
func (s *Selection) fallbacks(chosen int) []Candidate {
	n := s.req.Fallbacks
	if n <= 0 || !s.scored {
		return nil
	}
	st := &s.st
	eligible := st.eligible
	if len(eligible) == 0 { // no affinity filter ran on its own list: the kept ones only
		eligible = st.pass
	}
	st.ranked = st.ranked[:0]
	for _, i := range eligible {
		if i == chosen {
			continue
		}
		if !s.kept(i) {
			st.scores[i] = s.scoreOf(i)
		}
		st.ranked = append(st.ranked, i)
	}
	// A partial selection sort: n is small (a handful of retries), so n
	// passes over the candidates beat sorting them all.
	ranked := st.ranked
	for k := 0; k < min(n, len(ranked)); k++ {
		b := k
		for j := k + 1; j < len(ranked); j++ {
			if s.ranksBefore(ranked[j], ranked[b]) {
				b = j
			}
		}
		ranked[k], ranked[b] = ranked[b], ranked[k]
	}
	ranked = ranked[:min(n, len(ranked))]
	if len(ranked) == 0 {
		return nil
	}
	out := make([]Candidate, len(ranked))
	for k, i := range ranked {
		out[k] = s.Candidate(i)
		out[k].Score = st.scores[i]
	}
	return out
}

// ranksBefore reports whether candidate a is a better fallback than b: kept
// before dropped, then the higher score, then the earlier candidate.
func (s *Selection) ranksBefore(a, b int) bool {
	if ka, kb := s.kept(a), s.kept(b); ka != kb {
		return ka
	}
	if sa, sb := s.st.scores[a], s.st.scores[b]; sa != sb {
		return sa > sb
	}
	return a < b
}

// scoreOf is candidate i's total score, as the score stage computes it.
func (s *Selection) scoreOf(i int) float64 {
	var sc float64
	for _, ws := range s.r.pipe.scorers {
		sc += ws.Weight * clamp01(ws.Scorer.Score(s, i))
	}
	return sc
}

// moved is a request's accounting after it moved to the fallback that
// served it (Decision.Served).
type moved struct {
	inflight tokenload.Inflight
	endpoint string
	cached   int // the tokens the index predicted the fallback holds
}

// firstChunk is the request's first chunk on the fallback: its prompt
// tokens are released and, when it only prefills (Request.PrefillOnly), its
// part ends whole, as the pick's does.
func (m *moved) firstChunk(prefillOnly bool) {
	m.inflight.FirstChunk()
	if prefillOnly {
		m.inflight.Done()
	}
}

// movedState is the part of a Decision that Served writes and the lifecycle
// reads, from any goroutine.
type movedState struct {
	p      atomic.Pointer[moved]
	r      *Router       // nil when the Decision has no fallbacks
	keys   []kvindex.Key // the request's block keys, with speculation on
	bounds []int         // prompt i's keys are keys[bounds[i]:bounds[i+1]]
}

// Served records that the request was served by endpoint id instead of
// Endpoint: a gateway that tried the fallbacks in order (Envoy retrying down
// the endpoint list) reports the one that answered, as Envoy does in its
// served-endpoint metadata. The request's accounting moves there: the load
// it still holds on Endpoint (its uncached tokens until FirstChunk, and the
// open request) is released and the same load is dispatched to the
// fallback, with the fallback's own uncached tokens, Done checks the
// index's prediction for the fallback against the engine's report, and,
// with speculation on, the fallback gets the speculative index entries the
// pick got (the pick's stay until they expire: the index has no way to take
// them back, and the engines' KV events say what each really holds).
//
// It returns true when the accounting moved, false (changing nothing) when
// id is Endpoint, names none of Fallbacks (an endpoint the router never
// ranked for this request is not trusted as a label), the request has
// ended, or it moved already. Call it before FirstChunk; safe from any
// goroutine, concurrently with FirstChunk and Done.
func (d *Decision) Served(id string) bool {
	if d == nil || d.moved.r == nil || id == d.Endpoint.ID || d.ended.Load() {
		return false
	}
	k := slices.IndexFunc(d.Fallbacks, func(c Candidate) bool { return c.Endpoint.ID == id })
	if k < 0 {
		return false
	}
	if _, open := d.inflight.Held(); !open {
		return false
	}
	c := d.Fallbacks[k]
	r := d.moved.r
	m := &moved{endpoint: id, cached: min(c.Match.Blocks*r.cfg.BlockSize, d.PromptTokens)}
	uncached := c.UncachedTokens
	if d.first.Load() {
		uncached = 0 // the prefill is over wherever it ran
	}
	r.load.DispatchInto(&m.inflight, id, uncached)
	if !d.moved.p.CompareAndSwap(nil, m) {
		m.inflight.Done()
		return false
	}
	d.inflight.Done()
	// end sets ended before it reads moved; Served stores moved before it
	// reads ended: one of the two sees the other, so m is released. A
	// request that ended meanwhile moved nothing: no speculation follows.
	if d.ended.Load() {
		m.inflight.Done()
		return false
	}
	// The same with FirstChunk, which stores first before it reads moved:
	// one that came after first was read above and before moved was stored
	// missed m, so the fallback's prompt tokens are released here.
	if d.first.Load() {
		m.firstChunk(d.prefillOnly)
	}
	if keys := d.moved.keys; len(keys) > 0 {
		approximate := r.approx.Enabled() && r.approx.Current().Mode(id) == approx.ModeApproximate
		for p := 0; p+1 < len(d.moved.bounds); p++ {
			pk := keys[d.moved.bounds[p]:d.moved.bounds[p+1]]
			if len(pk) > 0 && *r.cfg.Speculative.Enabled {
				r.index.Speculate(id, pk, r.cfg.Speculative.TTL)
			}
			if approximate {
				r.approx.Record(id, pk) // the fallback's engine computes the prompt now
			}
		}
		if *r.cfg.Speculative.Enabled {
			r.cluster.Publish(id, keys)
		}
	}
	return true
}

// servedBy returns the endpoint that holds the request's accounting and the
// prediction Done checks: the fallback Served moved it to, or the pick.
func (d *Decision) servedBy() (endpoint string, cached int) {
	if m := d.moved.p.Load(); m != nil {
		return m.endpoint, m.cached
	}
	return d.Endpoint.ID, d.CachedTokens
}
