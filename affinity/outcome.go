package affinity

// Outcome is the reason a Filter decision took the shape it did. Its String
// form is the outcome label of
// llm_d_epp_prefix_cache_affinity_filter_decisions_total.
type Outcome uint8

const (
	// OutcomeNotApplicable: at most one candidate, no full block in the
	// request (nothing to match), or the filter is disabled; all pass.
	OutcomeNotApplicable Outcome = iota
	// OutcomeExploration: the exploration draw hit; all pass.
	OutcomeExploration
	// OutcomeNoMatch: no candidate is sticky; all pass.
	OutcomeNoMatch
	// OutcomeSticky: only the sticky candidates pass.
	OutcomeSticky
	// OutcomeLoadOverride: the TTFT gate fired on committed load; all pass.
	OutcomeLoadOverride
	// OutcomeRequestLoadOverride: the TTFT gate fired on estimates that
	// include this request's uncached tokens (Config.IncludeRequestTokens);
	// all pass.
	OutcomeRequestLoadOverride
	// OutcomeMissingSignal: the gate had to run but one side had no endpoint
	// with a known load signal; the result follows Config.MissingSignalPolicy
	// (sticky ones only, or all).
	OutcomeMissingSignal
	// OutcomeCrowded: the sticky candidates were crowded with open requests
	// (Config.CrowdingRatio); only the non-sticky candidates of least
	// crowding cost pass.
	OutcomeCrowded

	numOutcomes
)

var outcomeNames = [numOutcomes]string{
	"not_applicable", "exploration", "no_match", "sticky", "load_override", "request_load_override", "missing_signal",
	"crowded",
}

// String returns the metric label of o.
func (o Outcome) String() string {
	if o < numOutcomes {
		return outcomeNames[o]
	}
	return "unknown"
}
