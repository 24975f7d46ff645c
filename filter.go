package kvroute

import (
	"github.com/kvroute/kvroute/affinity"
)

// Filter is the filter stage's extension point: it narrows the candidates a
// request may be sent to, before they are scored. Filter is given the
// indices (into s's candidates, ascending) that the filters before it kept,
// and returns those that stay, in the same order: a subset of kept, which
// it may write into kept's array. It should keep at least one candidate
// (Pick fails with ErrNoEndpoints when none is left) and allocate nothing.
// It must be safe for concurrent use.
//
// The Router runs Options.Filters in order, then its prefix-cache affinity
// filter (Config.Affinity) on the candidates they kept.
type Filter interface {
	Filter(s *Selection, kept []int) []int
}

// Filter is the filter stage: it runs the router's filters (Options.Filters,
// then the affinity filter, which keeps the candidates that hold enough of
// the request unless the TTFT gate, exploration or a missing signal says
// otherwise) and returns the kept candidates' indices (valid until Release)
// with the affinity filter's outcome. It runs once; later calls return the
// same answer.
func (s *Selection) Filter() (kept []int, outcome affinity.Outcome) {
	if !s.filtered {
		sp := s.child(spanFilter)
		st := &s.st
		if af, only := s.r.pipe.filters[0].(affinityFilter); only && len(s.r.pipe.filters) == 1 && s.req.Fallbacks == 0 {
			// The affinity filter alone, on every candidate: it writes its
			// answer without reading the list of all of them.
			st.pass, s.outcome = af.f.ApplyProjected(st.pass, s.total, st.cands, &s.unc)
		} else {
			kept := st.pass[:0]
			for i := range s.eps {
				kept = append(kept, i)
			}
			for _, f := range s.r.pipe.filters {
				kept = f.Filter(s, kept)
			}
			st.pass = kept
		}
		s.filtered = true
		if sp != nil {
			s.traceFilter(sp)
		}
	}
	return s.st.pass, s.outcome
}

// kept reports whether the filter stage kept candidate i; false before it
// has run.
func (s *Selection) kept(i int) bool {
	if !s.filtered {
		return false
	}
	st := &s.st
	if len(st.kept) == 0 {
		st.kept = resize(st.kept, len(s.eps))
		for _, k := range st.pass {
			st.kept[k] = true
		}
	}
	return st.kept[i]
}

// affinityFilter is the prefix-cache affinity filter (package affinity) as
// the filter stage's last Filter; its outcome is the Selection's.
type affinityFilter struct{ f *affinity.Filter }

// Filter applies the affinity filter to the kept candidates.
func (a affinityFilter) Filter(s *Selection, kept []int) []int {
	st := &s.st
	if s.req.Fallbacks > 0 {
		// A dropped candidate still serves when the pick fails: remember
		// what the affinity filter decided among, for Decision.Fallbacks.
		st.eligible = append(st.eligible[:0], kept...)
	}
	if len(kept) == len(s.eps) { // every candidate: the filter reads them in place
		kept, s.outcome = a.f.ApplyProjected(kept, s.total, st.cands, &s.unc)
		return kept
	}
	// The earlier filters dropped some: the affinity filter decides among
	// the others, then its answer is mapped back to candidate indices.
	st.sub = st.sub[:0]
	for _, i := range kept {
		st.sub = append(st.sub, st.cands[i])
	}
	var pass []int
	pass, s.outcome = a.f.ApplyProjected(st.subPass, s.total, st.sub, &s.unc)
	st.subPass = pass
	for j, p := range pass { // ascending, p >= j: kept[p] is read before it is overwritten
		kept[j] = kept[p]
	}
	return kept[:len(pass)]
}
