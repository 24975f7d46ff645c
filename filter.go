package kvroute

import (
	"github.com/kvroute/kvroute/affinity"
)

// Filter is the affinity stage: it keeps the candidates that hold enough of
// the request (sticky) unless the TTFT gate, exploration or a missing
// signal says otherwise, and returns the kept candidates' indices (valid
// until Release) with the outcome. It runs once; later calls return the
// same answer.
func (s *Selection) Filter() (kept []int, outcome affinity.Outcome) {
	if !s.filtered {
		sp := s.child(SpanFilter)
		s.st.pass, s.outcome = s.r.filter.Apply(s.st.pass, s.total, s.st.cands)
		s.filtered = true
		if sp != nil {
			s.traceFilter(sp)
		}
	}
	return s.st.pass, s.outcome
}

// Kept reports whether the affinity filter kept candidate i (running Filter
// if it has not run).
func (s *Selection) Kept(i int) bool {
	kept, _ := s.Filter()
	st := &s.st
	if len(st.kept) == 0 {
		st.kept = resize(st.kept, len(s.eps))
		for _, k := range kept {
			st.kept[k] = true
		}
	}
	return st.kept[i]
}
