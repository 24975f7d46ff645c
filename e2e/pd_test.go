package e2e

import (
	"errors"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// The P/D workload is the same on every build, its chats grow turn by turn
// (each turn's messages extend the previous turn's), and its kinds are
// where the decider's reasons come from.
func TestPDWorkload(t *testing.T) {
	o, err := Options{Fast: true}.withDefaults()
	require.NoError(t, err)
	size := pdSizeFor(o)
	wl := newPDWorkload(o.Model, size)
	require.True(t, reflect.DeepEqual(wl, newPDWorkload(o.Model, size)), "deterministic")
	require.Equal(t, size.chats*size.turns+size.documents, wl.requests)
	require.Len(t, wl.sessions, size.chats+size.documents)
	require.Equal(t, 2*o.LoadConcurrency, wl.clients)
	var kinds [pdKinds]int
	for _, s := range wl.sessions {
		for t2, r := range s {
			kinds[r.kind]++
			require.Equal(t, true, r.body["stream"])
			require.Equal(t, size.maxTokens, r.body["max_tokens"])
			if t2 > 0 {
				prev := s[t2-1].body["messages"].([]map[string]string)
				cur := r.body["messages"].([]map[string]string)
				require.Equal(t, prev, cur[:len(prev)], "a follow-up turn extends the conversation")
				require.Len(t, cur, len(prev)+2, "the assistant's reply and the new question")
			}
		}
	}
	require.Equal(t, [pdKinds]int{size.chats, size.chats * (size.turns - 1), size.documents}, kinds)
	require.Equal(t, pdDocument, wl.sessions[1][0].kind, "chats and documents alternate")
}

// PDReport.Check passes a report showing what the step must show and names
// each thing a report gets wrong.
func TestPDReportCheck(t *testing.T) {
	row := func(policy string, split int) PDPolicyResult {
		return PDPolicyResult{Policy: policy, Requests: 10, Succeeded: 10, Split: split, Exchanges: split}
	}
	good := PDReport{Policies: []PDPolicyResult{row(PDAggregated, 0), row(PDAlwaysSplit, 10), row(PDDecider, 4)}}
	require.NoError(t, good.Check())
	require.InDelta(t, 0.4, good.Policies[2].SplitRate(), 1e-9)
	require.Zero(t, PDPolicyResult{}.SplitRate())

	for name, tc := range map[string]struct {
		edit func(r *PDReport)
		want string
	}{
		"failed request": {func(r *PDReport) {
			r.Policies[0].Succeeded, r.Policies[0].FirstError = 9, errors.New("boom")
		}, "aggregated: 1 of 10 requests failed (first: boom)"},
		"aggregated split":  {func(r *PDReport) { r.Policies[0].Split, r.Policies[0].Exchanges = 1, 1 }, "aggregated split 1 requests"},
		"always-split some": {func(r *PDReport) { r.Policies[1].Split, r.Policies[1].Exchanges = 9, 9 }, "always-split split only 9 of 10"},
		"decider none":      {func(r *PDReport) { r.Policies[2].Split, r.Policies[2].Exchanges = 0, 0 }, "decider split 0 of 10 requests"},
		"decider all":       {func(r *PDReport) { r.Policies[2].Split, r.Policies[2].Exchanges = 10, 10 }, "decider split 10 of 10 requests"},
		"fallback":          {func(r *PDReport) { r.Policies[1].Fallbacks, r.Policies[1].Exchanges = 1, 9 }, "sidecars exchanged 9 and fell back 1 times"},
		"missing policy":    {func(r *PDReport) { r.Policies = r.Policies[:2] }, "2 policies measured, want 3"},
	} {
		r := PDReport{Policies: append([]PDPolicyResult(nil), good.Policies...)}
		tc.edit(&r)
		require.ErrorContains(t, r.Check(), tc.want, name)
	}
}
