package kvevents

import (
	"errors"

	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
)

// Hybrid-attention models publish one cache group per layer kind
// (group_idx, kv_cache_spec_kind, and for sliding windows
// kv_cache_spec_sliding_window). The Applier indexes the prefix-shaped
// groups as blocks and hands the sliding-window and Mamba groups to the
// index's group sets (kvindex.Index.StoreGroup), which limit an endpoint's
// matches to the prefixes every group can serve. Their blocks are named by
// the same engine hashes as the full-attention group's, so they are
// resolved to router keys through the endpoint's full-attention blocks: a
// group store naming blocks the full-attention group has not stored yet is
// kept pending until it has, within a bound (apply_groups_pending.go);
// what stays unmapped is counted (reason "unknown_hash") and not recorded,
// which only makes the endpoint's matches shorter. A group's set holds what
// the device holds: a removal from a secondary tier (medium CPU or
// STORAGE, as vLLM's offloading connector reports its evictions) and an
// offloading placeholder store are skipped as stores of the group's kind.

// Reasons of stores_skipped_total for non-prefix groups.
const (
	skipNoWindow Reason = "no_sliding_window" // a sliding-window store without its window, and no ApplierConfig.SlidingWindow
)

// storeGroup applies a store of a sliding-window or Mamba group.
func (a *Applier) storeGroup(endpoint string, st *endpointState, e *wire.Event, kind kvindex.GroupKind, group int, res *ApplyResult) {
	n := len(e.BlockHashes)
	g := kvindex.GroupStore{Group: group, Kind: kind}
	if kind == kvindex.GroupSlidingWindow {
		switch {
		case e.HasSlidingWindow && e.SlidingWindow > 0 && e.SlidingWindow <= 1<<30:
			g.Window = int(e.SlidingWindow)
		case a.window > 0:
			g.Window = a.window
		default:
			a.skip(res, e.Kind, skipNoWindow, n)
			return
		}
	}
	if e.BlockSize > 0 && e.BlockSize != a.bs {
		st.engBS = e.BlockSize
	}
	g.Hashes = st.groupHashes(e.BlockHashes, a.engineBlockSize(endpoint, st), a.bs, kind)
	g.Unknown = st.unknownScratch()
	_, err := a.ix.StoreGroup(endpoint, &g)
	st.pendScratch = g.Unknown[:0]
	g.Hashes = nil
	var serr *kvindex.StoreError
	switch {
	case err == nil:
	case errors.Is(err, kvindex.ErrUnknownHash):
		a.pend(st, &g, e.Kind, g.Unknown, res) // their full-attention store may come later
	case errors.As(err, &serr):
		a.skip(res, e.Kind, serr.Reason, n)
		return
	default:
		a.skip(res, e.Kind, skipIndexRejected, n)
		return
	}
	res.Stored++
	res.StoredBlocks += n
}

// removeGroup applies a removal of a sliding-window or Mamba group.
func (a *Applier) removeGroup(endpoint string, st *endpointState, e *wire.Event, kind kvindex.GroupKind, group int, res *ApplyResult) {
	hashes := st.unpend(group, st.groupHashes(e.BlockHashes, a.engineBlockSize(endpoint, st), a.bs, kind))
	res.Removed++
	res.RemovedBlocks += a.ix.RemoveGroup(endpoint, group, hashes)
}

// groupHashes returns (in st.synth) the hashes under which the index knows
// the router blocks of a group's engine blocks: the engine hashes
// themselves at the index's block size; otherwise the synthetic hashes of
// the router blocks each engine block completes (apply_resize.go) — all of
// them for a sliding window, and for Mamba the one ending where the engine
// block ends, when that is a router block boundary (a state saved
// elsewhere cannot start a prefix of whole router blocks).
func (st *endpointState) groupHashes(hashes []uint64, E, R int, kind kvindex.GroupKind) []uint64 {
	st.synth = st.synth[:0]
	if E == R {
		return append(st.synth, hashes...)
	}
	for _, h := range hashes {
		var cnt int
		aligned := true
		if E%R == 0 {
			cnt = E / R
		} else if pe, ok := st.side.get(h); ok {
			cnt, aligned = int(pe.count), len(pe.left) == 0
		}
		if kind == kvindex.GroupMamba {
			if aligned && cnt > 0 {
				st.synth = append(st.synth, synthHash(h, cnt-1))
			}
			continue
		}
		for c := 0; c < cnt; c++ {
			st.synth = append(st.synth, synthHash(h, c))
		}
	}
	return st.synth
}
