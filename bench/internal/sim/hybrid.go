package sim

import (
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/simengine"
)

// Hybrid-attention models (Fleet.Hybrid): an engine reuses a cached prefix
// only as far as its sliding-window and Mamba groups allow, so an index
// that sees only the full-attention group over-predicts. CacheError
// measures that on the kvroute policy: per request, the cached tokens the
// router predicted on the endpoint it chose (kvroute.Decision.CachedTokens,
// capped like the engine caps a hit) against those the engine served
// (simengine.Result.CachedTokens). Config.IgnoreCacheGroups runs the same
// traffic with the groups' events dropped before the index, as kvroute
// indexed hybrid models before it tracked their groups.

// CacheError summarises predicted against served cached tokens.
type CacheError struct {
	// Requests measured (finished, routed by kvroute).
	Requests int `json:"requests"`
	// MeanAbsTokens is the mean |predicted − served| in tokens, and
	// RelError Σ|predicted − served| / Σ prompt tokens.
	MeanAbsTokens float64 `json:"meanAbsTokens"`
	RelError      float64 `json:"relError"`
	// Over and Under count the requests predicted above and below what
	// the engine served.
	Over  int `json:"over"`
	Under int `json:"under"`
	// Predicted and Served are the totals in tokens.
	Predicted int64 `json:"predicted"`
	Served    int64 `json:"served"`
}

// cacheErrAcc accumulates CacheError over a run.
type cacheErrAcc struct {
	n, over, under          int
	abs, prompt, pred, serv int64
}

// add records a finished request routed with a kvroute decision.
func (a *cacheErrAcc) add(rq *request, res simengine.Result, bs int) {
	if rq.decision == nil || res.Err != nil || res.PromptTokens == 0 {
		return
	}
	pred := min(rq.decision.CachedTokens, (res.PromptTokens-1)/bs*bs)
	d := int64(pred - res.CachedTokens)
	switch {
	case d > 0:
		a.over++
	case d < 0:
		a.under++
		d = -d
	}
	a.n++
	a.abs += d
	a.prompt += int64(res.PromptTokens)
	a.pred += int64(pred)
	a.serv += int64(res.CachedTokens)
}

func (a *cacheErrAcc) result() *CacheError {
	if a.n == 0 {
		return nil
	}
	return &CacheError{Requests: a.n, MeanAbsTokens: float64(a.abs) / float64(a.n),
		RelError: float64(a.abs) / float64(max(a.prompt, 1)), Over: a.over, Under: a.under,
		Predicted: a.pred, Served: a.serv}
}

// dropCacheGroups removes from b the stores and removals of the cache
// groups the index does not read as prefixes (Config.IgnoreCacheGroups).
func dropCacheGroups(b *wire.Batch) {
	n := 0
	for i := range b.Events {
		e := &b.Events[i]
		if _, ok := kvindex.GroupKindOf(e.Kind); ok && e.Type == wire.EventBlockStored {
			continue
		}
		if e.Type == wire.EventBlockRemoved && e.HasGroup && e.Group != 0 {
			continue // the hybrid mode's window and Mamba groups are 1 and 2
		}
		// Swapped, not copied: the Decoder reuses each slot's slices for
		// the next batch, so a copy would leave two slots sharing one
		// event's arrays and the next Decode would write two events'
		// hashes and tokens into them.
		b.Events[n], b.Events[i] = b.Events[i], b.Events[n]
		n++
	}
	b.Events = b.Events[:n]
}
