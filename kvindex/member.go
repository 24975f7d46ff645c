package kvindex

// A membership records that one endpoint holds one block. It is one uint64
// inside the block's value in the block map, so that Match reads everything
// it needs without touching per-endpoint state:
//
//	bits  0..23  endpoint ID (1 … maxEndpointID; 0 never occurs)
//	bit   24     speculative: set only for blocks that no confirmed store covers
//	speculative memberships:
//	bits 25..63  expiry, milliseconds since the index's epoch (saturating)
//	confirmed memberships:
//	bits 25..32  tier mask (bit t = tier ID t holds the block); what Match reads
//	bit  33      complex: the (tier, group, count) pairs live in the endpoint's
//	             side table instead of the bits below
//	bits 34..35  group slot shared by every pair (0 ungrouped, 1..3 groups 0..2)
//	bits 36..49  reference count − 1 of tiers 1..7, two bits each (a GPU
//	             count above 1 makes the membership complex)
const (
	idBits        = 24
	maxEndpointID = 1<<idBits - 1
	idMask        = uint64(maxEndpointID)
	specBit       = uint64(1) << 24
	expShift      = 25
	maxExpiry     = uint64(1)<<(64-expShift) - 1
	tierShift     = 25
	complexBit    = uint64(1) << 33
	groupShift    = 34
	countShift    = 36
	// stdPattern is (m >> 24) & 0x1ff of a confirmed membership held in the
	// GPU tier only: the common case Match handles without a table lookup.
	stdPattern = 1 << 1
)

// maxTiers is the number of distinct tier names an index tracks; further
// names share the last tier ID.
const maxTiers = 8

// memberID returns the endpoint ID of a membership.
func memberID(m uint64) uint32 { return uint32(m & idMask) }

// isSpec reports whether m is a speculative membership.
func isSpec(m uint64) bool { return m&specBit != 0 }

// specExpiry returns the expiry (ms since epoch) of a speculative membership.
func specExpiry(m uint64) uint64 { return m >> expShift }

// tierMaskOf returns the tier mask of a confirmed membership.
func tierMaskOf(m uint64) uint8 { return uint8(m >> tierShift) }

// makeSpec builds a speculative membership.
func makeSpec(id uint32, expMs uint64) uint64 {
	if expMs > maxExpiry {
		expMs = maxExpiry
	}
	return uint64(id) | specBit | expMs<<expShift
}

// pair is one (tier, group) that holds a block on an endpoint, with its
// reference count.
type pair struct {
	tier  uint8
	group int32
	count uint32
}

// decodePairs appends the pairs of a confirmed membership to dst. cx is the
// endpoint's side table entry, used when the membership is complex.
func decodePairs(dst []pair, m uint64, cx []pair) []pair {
	if m&complexBit != 0 {
		return append(dst, cx...)
	}
	mask := tierMaskOf(m)
	group := int32((m>>groupShift)&3) - 1
	for t := uint8(0); t < maxTiers; t++ {
		if mask&(1<<t) == 0 {
			continue
		}
		c := uint32(1)
		if t > 0 {
			c = uint32((m>>(countShift+2*uint(t-1)))&3) + 1
		}
		dst = append(dst, pair{tier: t, group: group, count: c})
	}
	return dst
}

// encodePairs builds the membership word for pairs. It reports complex=true
// when the pairs do not fit the compact form, in which case the caller keeps
// them in the endpoint's side table.
func encodePairs(id uint32, pairs []pair) (m uint64, complex bool) {
	m = uint64(id)
	var mask uint8
	for _, p := range pairs {
		mask |= 1 << p.tier
	}
	m |= uint64(mask) << tierShift
	if len(pairs) == 0 {
		return m, false
	}
	g := pairs[0].group
	if g < -1 || g > 2 {
		return m | complexBit, true
	}
	var seen uint8
	for _, p := range pairs {
		if p.group != g || seen&(1<<p.tier) != 0 {
			return m | complexBit, true
		}
		seen |= 1 << p.tier
		if p.tier == 0 {
			if p.count != 1 {
				return m | complexBit, true
			}
			continue
		}
		if p.count < 1 || p.count > 4 {
			return m | complexBit, true
		}
		m |= uint64(p.count-1) << (countShift + 2*uint(p.tier-1))
	}
	m |= uint64(g+1) << groupShift
	return m, false
}

// addPair adds one store of (tier, group) to pairs. Every tier is
// reference-counted: vLLM caches a second copy of a block when two requests
// compute it in the same step, announces both, and later announces a
// BlockRemoved for each copy it evicts; the offloading connector may announce
// one block in overlapping chunks. Counting keeps the block indexed until the
// last copy is gone. The cost is vLLM's opt-in "full" report mode, which
// re-announces reused blocks without a matching removal: such a block stays
// indexed until the endpoint is cleared or its capacity evicts it.
func addPair(pairs []pair, tier uint8, group int32) []pair {
	for i := range pairs {
		if pairs[i].tier == tier && pairs[i].group == group {
			if pairs[i].count < 1<<31 {
				pairs[i].count++
			}
			return pairs
		}
	}
	return append(pairs, pair{tier: tier, group: group, count: 1})
}

// removePair removes one store of (tier, group). It reports whether the pair
// was present and whether it disappeared (its count reached zero).
func removePair(pairs []pair, tier uint8, group int32) (_ []pair, found, gone bool) {
	for i := range pairs {
		if pairs[i].tier == tier && pairs[i].group == group {
			if pairs[i].count > 1 {
				pairs[i].count--
				return pairs, true, false
			}
			return append(pairs[:i], pairs[i+1:]...), true, true
		}
	}
	return pairs, false, false
}
