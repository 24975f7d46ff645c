package kvroute

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/affinity"
	"github.com/kvroute/kvroute/render"
)

// dropFilter drops the candidates whose endpoint ID it names.
type dropFilter map[string]bool

func (f dropFilter) Filter(s *Selection, kept []int) []int {
	out := kept[:0]
	for _, i := range kept {
		if !f[s.Candidate(i).Endpoint.ID] {
			out = append(out, i)
		}
	}
	return out
}

// Options.Filters run before the affinity filter, which then decides among
// the candidates they kept: with the warm endpoint dropped the request goes
// by load alone to one of the others; with every endpoint dropped Pick
// fails with ErrNoEndpoints.
func TestExtraFiltersRunBeforeTheAffinityFilter(t *testing.T) {
	eps := endpoints(4)
	drop := dropFilter{}
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) }, Options{Filters: []Filter{drop}})
	p := prompt(9, 64*8)
	engineStores(t, r.Index(), eps[1].ID, p, 1)
	engineStores(t, r.Index(), eps[3].ID, p, 1000)

	d := pick(t, r, p, eps)
	require.Contains(t, []string{eps[1].ID, eps[3].ID}, d.Endpoint.ID)
	require.Equal(t, affinity.OutcomeSticky, d.Outcome)
	d.Done(DoneInfo{})

	drop[eps[1].ID] = true // one warm endpoint goes: the other is sticky
	s, err := r.Match(context.Background(), &Request{Prompts: []render.Prompt{{TokenIDs: p}}}, eps)
	require.NoError(t, err)
	kept, outcome := s.Filter()
	require.Equal(t, []int{3}, kept)
	require.Equal(t, affinity.OutcomeSticky, outcome)
	require.False(t, s.Candidate(1).Kept)
	s.Release()

	drop[eps[3].ID] = true // no warm one left: no match, by load among the rest
	d = pick(t, r, p, eps)
	require.Contains(t, []string{eps[0].ID, eps[2].ID}, d.Endpoint.ID)
	require.Equal(t, affinity.OutcomeNoMatch, d.Outcome)
	d.Done(DoneInfo{})

	drop[eps[0].ID], drop[eps[2].ID] = true, true
	_, err = r.Pick(context.Background(), &Request{Prompts: []render.Prompt{{TokenIDs: p}}}, eps)
	require.ErrorIs(t, err, ErrNoEndpoints)
}

// An extra filter that drops candidates sends the affinity filter down its
// subset path, which reuses the Selection's scratch: Pick still allocates
// only the Decision.
func TestExtraFilterAllocatesOnlyTheDecision(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items at random: allocation counts vary")
	}
	eps := endpoints(16)
	r := testRouter(t, nil, Options{Filters: []Filter{dropFilter{eps[0].ID: true, eps[5].ID: true}}})
	p := prompt(3, 1024)
	engineStores(t, r.Index(), eps[2].ID, p, 1)
	req := &Request{Prompts: []render.Prompt{{TokenIDs: p}}}
	allocs := testing.AllocsPerRun(200, func() {
		d, err := r.Pick(context.Background(), req, eps)
		if err != nil {
			t.Fatal(err)
		}
		if d.Endpoint.ID != eps[2].ID {
			t.Fatalf("picked %s", d.Endpoint.ID)
		}
		d.Done(DoneInfo{})
	})
	require.Equal(t, 1.0, allocs, "the Decision only")
}
