package disagg

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
)

// favour is a Scorer that rates one endpoint v and every other 0, as
// session affinity's scorer rates the endpoint of a session's last turn.
type favour struct {
	id string
	v  float64
}

func (f favour) Score(s *kvroute.Selection, i int) float64 {
	if s.Candidate(i).Endpoint.ID == f.id {
		return f.v
	}
	return 0
}

// Options.DecodeScorers enter the decode pick: with two idle decode
// endpoints alike, the pick goes to the first; a scorer favouring the
// second moves it there, clamped to [0, 1] and weighted.
func TestDecodeScorersEnterTheDecodePick(t *testing.T) {
	without := newFleet(t, Config{}, Options{})
	d := without.pick(t, "r1", prompt(7, 256))
	require.Equal(t, "10.0.0.3:8000", d.Endpoint.ID, "ties go to the earlier decode candidate")
	d.Done(kvroute.DoneInfo{})

	for _, v := range []float64{1, 5} { // 5 is clamped to 1
		f := newFleet(t, Config{}, Options{DecodeScorers: []kvroute.WeightedScorer{{Scorer: favour{"10.0.0.4:8000", v}, Weight: 0.5}}})
		d = f.pick(t, "r1", prompt(7, 256))
		require.Equal(t, "10.0.0.4:8000", d.Endpoint.ID)
		d.Done(kvroute.DoneInfo{})
		f.requireIdle(t)
	}

	// A negative or NaN value counts as 0: the tie stays with the first.
	for _, v := range []float64{-3, math.NaN()} {
		f := newFleet(t, Config{}, Options{DecodeScorers: []kvroute.WeightedScorer{{Scorer: favour{"10.0.0.4:8000", v}, Weight: 1}}})
		d = f.pick(t, "r1", prompt(7, 256))
		require.Equal(t, "10.0.0.3:8000", d.Endpoint.ID)
		d.Done(kvroute.DoneInfo{})
	}
}

// A decode scorer's preference is weighed against the decode score: an
// endpoint holding half the prompt (below the affinity filter's threshold,
// so both are kept) keeps the pick over a small preference for another,
// and loses it to a large one. It is a preference, not a filter: what the
// affinity filter drops it cannot bring back.
func TestDecodeScorersWeighedAgainstTheCache(t *testing.T) {
	tokens := prompt(8, 4096)
	for _, c := range []struct {
		weight float64
		want   string
	}{{0.1, "10.0.0.3:8000"}, {3, "10.0.0.4:8000"}} {
		f := newFleet(t, Config{}, Options{DecodeScorers: []kvroute.WeightedScorer{{Scorer: favour{"10.0.0.4:8000", 1}, Weight: c.weight}}})
		f.stores(t, "10.0.0.3:8000", tokens[:2048], 1<<40)
		d := f.pick(t, "r1", tokens)
		require.Equal(t, c.want, d.Endpoint.ID, "weight %v", c.weight)
		d.Done(kvroute.DoneInfo{})
	}
}
