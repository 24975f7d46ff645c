package enginemetrics

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/tokenload"
)

func TestPeerLoads(t *testing.T) {
	own := map[string][2]int64{ // tokens, requests this router has open
		"a": {4096, 4}, // two of its four requests still prefilling 2,048 tokens
		"b": {0, 2},
		"c": {2048, 2},
	}
	ownOf := func(ep string) (int64, int64) { o := own[ep]; return o[0], o[1] }
	sigs := map[string]Signal{
		"a": {Waiting: 3, Running: 5}, // 8 at the engine: 4 are other routers'
		"b": {Waiting: 0, Running: 2}, // only this router's
		"c": {Waiting: 0, Running: 1}, // fewer than this router's: one still on its way
		"d": {Waiting: 2, Running: 1}, // this router sent none
	}
	// This router's open requests carry 6,144 tokens over 8 requests: 768
	// each.
	require.Equal(t, map[string]tokenload.PeerLoad{
		"a": {Tokens: 4 * 768, Requests: 4},
		"d": {Tokens: 3 * 768, Requests: 3},
	}, PeerLoads(sigs, ownOf))

	// A router with nothing open charges other routers' requests no
	// tokens, only their count.
	none := func(string) (int64, int64) { return 0, 0 }
	require.Equal(t, map[string]tokenload.PeerLoad{"a": {Requests: 8}, "b": {Requests: 2}, "c": {Requests: 1}, "d": {Requests: 3}},
		PeerLoads(sigs, none))
	require.Empty(t, PeerLoads(nil, ownOf))
	require.Empty(t, PeerLoads(map[string]Signal{"a": {Waiting: -5, Running: 1}}, ownOf), "negative counts count as zero")
}

// The estimate goes into a tracker as the peers' share of each endpoint's
// load, on top of the router's own.
func TestPeerLoadsFeedATracker(t *testing.T) {
	tr, err := tokenload.NewTracker(tokenload.Options{})
	require.NoError(t, err)
	in := tr.Dispatch("a", 2048)
	defer in.Done()
	tr.SetPeerLoads(PeerLoads(map[string]Signal{"a": {Waiting: 3}}, tr.LocalLoad))
	require.Equal(t, tokenload.PeerLoad{Tokens: 2 * 2048, Requests: 2}, tr.PeerLoadOf("a"))
}

// A reader of the signals (the gateway's peer-load feed) runs at the
// Scraper's interval, defaults applied.
func TestScraperInterval(t *testing.T) {
	for cfg, want := range map[Config]time.Duration{{}: DefaultInterval, {Interval: time.Second, Staleness: 3 * time.Second}: time.Second} {
		s, err := New(cfg, Options{})
		require.NoError(t, err)
		require.Equal(t, want, s.Interval())
		s.Close()
	}
}

// An absurd own load per request times an engine's queue (clamped at
// maxQueueLength) can exceed int64: the estimate saturates instead of
// converting to a negative count, which the tracker would read as idle.
func TestPeerLoadsSaturate(t *testing.T) {
	own := func(ep string) (int64, int64) {
		if ep == "a" {
			return math.MaxInt64 / 2, 1 // one open request carrying 2^62 tokens
		}
		return 0, 0
	}
	sigs := map[string]Signal{"a": {Running: 1}, "b": {Waiting: maxQueueLength, Running: maxQueueLength}}
	got := PeerLoads(sigs, own)
	require.Equal(t, tokenload.PeerLoad{Tokens: maxPeerTokens, Requests: 2 * maxQueueLength}, got["b"])
	require.Positive(t, got["b"].Tokens)
}

// Own loads that sum past int64 over the endpoints give a saturated
// estimate, not a negative average load per request that makes every
// queue read as idle.
func TestPeerLoadsOwnLoadsSumPastInt64(t *testing.T) {
	own := func(ep string) (int64, int64) {
		if ep == "a" || ep == "c" {
			return math.MaxInt64, 1
		}
		return 0, 0
	}
	sigs := map[string]Signal{"a": {Running: 1}, "b": {Waiting: 3}, "c": {Running: 1}}
	got := PeerLoads(sigs, own)
	require.Equal(t, tokenload.PeerLoad{Tokens: maxPeerTokens, Requests: 3}, got["b"])
}
