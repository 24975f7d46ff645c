package kvindex

import "unsafe"

// blockVal is the value of one block in the block map, as the map hands it
// out: the memberships of every endpoint that holds the block. The map
// stores it as one word (the membership, or a handle to a member array in a
// pointer-free arena); a blockVal lives only on the stack, pointing into
// that arena. Member arrays are immutable once published — a writer builds
// a new one under the shard's lock — so Match reads them without locks.
type blockVal struct {
	// one is the only membership when many is nil. When many is set, it is
	// the member array's header: bits 0..31 the number of memberships
	// behind many, bits 32..55 how many of them come first as "standard"
	// memberships (confirmed, GPU tier only, sorted by endpoint ID), and
	// hdrNarrow when those span fewer than 64 endpoint IDs, so that the
	// mask word describes them exactly.
	one uint64
	// many points at the first element of an immutable array of
	// memberships when two or more endpoints hold the block (in the
	// block map's arena, or a fresh array from with). The word before it
	// is the standard mask: with hdrNarrow, bit j is set when the endpoint
	// with ID memberID(first standard membership)+j holds the block as a
	// standard membership — Match's one load and AND per block.
	many *uint64
}

// The member array header (blockVal.one when many is set): bits 0..31 count
// the memberships.
const (
	hdrStdShift  = 32 // header: standard memberships, 24 bits
	hdrStdMask   = 1<<24 - 1
	hdrNarrow    = uint64(1) << 63 // header: the standard mask is exact
	arrayHdrSize = 2               // header and mask words before the memberships
)

// memberSlice returns the n memberships starting at p.
func memberSlice(p *uint64, n int) []uint64 { return unsafe.Slice(p, n) }

// stdMask returns the standard mask word of a value with several holders.
func (v *blockVal) stdMask() uint64 { return *(*uint64)(unsafe.Add(unsafe.Pointer(v.many), -8)) }

// arrayWords returns the mask word and the memberships of a value with
// several holders, as stored after its header.
func (v *blockVal) arrayWords() []uint64 {
	return unsafe.Slice((*uint64)(unsafe.Add(unsafe.Pointer(v.many), -8)), 1+int(uint32(v.one)))
}

// isStd reports whether a membership is confirmed and held in the GPU tier
// only: the common case, which Match handles without further decoding.
func isStd(m uint64) bool { return (m>>24)&0x1ff == stdPattern }

// members returns the memberships of v. single is caller storage for the
// inline case, so no allocation happens.
func (v *blockVal) members(single *[1]uint64) []uint64 {
	if v.many == nil {
		if v.one == 0 {
			return nil
		}
		single[0] = v.one
		return single[:]
	}
	return unsafe.Slice(v.many, int(uint32(v.one)))
}

// split returns the standard memberships and the others of a value with
// several holders (v.many != nil).
func (v *blockVal) split() (std, rest []uint64) {
	all := unsafe.Slice(v.many, int(uint32(v.one)))
	nStd := int(v.one >> hdrStdShift & hdrStdMask)
	return all[:nStd], all[nStd:]
}

// find returns the membership of endpoint id and its position, or (0, -1).
func (v *blockVal) find(id uint32) (uint64, int) {
	var single [1]uint64
	for i, m := range v.members(&single) {
		if memberID(m) == id {
			return m, i
		}
	}
	return 0, -1
}

// count returns the number of memberships in v.
func (v *blockVal) count() int {
	if v.many != nil {
		return int(uint32(v.one))
	}
	if v.one != 0 {
		return 1
	}
	return 0
}

// with returns a copy of v in which the membership at position idx (-1: a new
// one) is replaced by m; m == 0 removes it. v itself is never modified. A
// new member array is freshly allocated.
func (v *blockVal) with(idx int, m uint64) blockVal { return v.withBuf(idx, m, nil) }

// withBuf is with building a new member array in *buf (grown as needed)
// instead of a fresh allocation, for callers that copy the result away
// before reusing the buffer (the block map copies it into its arena).
func (v *blockVal) withBuf(idx int, m uint64, buf *[]uint64) blockVal {
	var single [1]uint64
	old := v.members(&single)
	n := len(old)
	switch {
	case idx < 0 && m == 0:
		return *v
	case idx < 0:
		n++
	case m == 0:
		n--
	}
	switch n {
	case 0:
		return blockVal{}
	case 1:
		if m != 0 {
			return blockVal{one: m}
		}
		return blockVal{one: old[1-idx]} // removal leaving the other one
	}
	// Build the new array (after its mask word) with the standard
	// memberships first, sorted by endpoint ID.
	var words []uint64
	if buf != nil {
		if cap(*buf) < n+1 {
			*buf = make([]uint64, n+1, 2*(n+1))
		}
		words = (*buf)[:n+1]
	} else {
		words = make([]uint64, n+1)
	}
	arr := words[1:]
	front, back := 0, n
	put := func(x uint64) {
		if isStd(x) {
			arr[front] = x
			front++
		} else {
			back--
			arr[back] = x
		}
	}
	for i, x := range old {
		if i == idx {
			if m != 0 {
				put(m)
			}
			continue
		}
		put(x)
	}
	if idx < 0 {
		put(m)
	}
	words[0] = 0
	hdr := uint64(n) | uint64(front)<<hdrStdShift
	if front > 0 {
		std := arr[:front]
		// old's standard memberships were sorted; at most one is out of
		// place, so insertion sort is linear.
		for i := 1; i < len(std); i++ {
			for j := i; j > 0 && memberID(std[j]) < memberID(std[j-1]); j-- {
				std[j], std[j-1] = std[j-1], std[j]
			}
		}
		base := memberID(std[0])
		if memberID(std[front-1])-base < 64 {
			var mask uint64
			for _, x := range std {
				mask |= 1 << (memberID(x) - base)
			}
			words[0] = mask
			hdr |= hdrNarrow
		}
	}
	return blockVal{one: hdr, many: &arr[0]}
}
