package kvindex

import (
	"math/bits"
	"unsafe"
)

// blockVal is the value of one block in the block map, as the map hands it
// out: the memberships of every endpoint that holds the block. The map
// stores it as one word (the membership, or a handle to a member array in a
// pointer-free arena); a blockVal lives only on the stack, pointing into
// that arena. Member arrays are immutable once published — a writer builds
// a new one under the shard's lock — so Match reads them without locks.
//
// A member array takes one of two forms:
//
//   - the full form: the standard mask word, then every membership, the
//     standard ones first (see one);
//   - the implicit form, for an array whose memberships are all standard,
//     span fewer than 64 endpoint IDs (so the mask is exact) and agree in
//     every bit above the endpoint ID (the tier, group and count bits: what
//     the holders of a prompt announce alike): only the mask word and the
//     first membership m0, whatever the count. The membership of the
//     endpoint with ID memberID(m0)+j is m0+j for every set bit j of the
//     mask. Four holders take 2 words instead of 5.
//
// Both forms start with the mask word and the first membership, which is
// all Match's fast path reads; everything that needs the memberships
// themselves of an implicit array synthesizes them (members, find, split).
type blockVal struct {
	// one is the only membership when many is nil. When many is set, it is
	// the member array's header: bits 0..31 the number of memberships
	// behind many, bits 32..55 how many of them come first as "standard"
	// memberships (confirmed, GPU tier only, sorted by endpoint ID),
	// hdrNarrow when those span fewer than 64 endpoint IDs, so that the
	// mask word describes them exactly, and hdrImplicit for the implicit
	// form.
	one uint64
	// many points at the first membership of an immutable member array
	// when two or more endpoints hold the block (in the block map's arena,
	// or a fresh array from with). The word before it is the standard
	// mask: with hdrNarrow, bit j is set when the endpoint with ID
	// memberID(first standard membership)+j holds the block as a standard
	// membership — Match's one load and AND per block.
	many *uint64
}

// The member array header (blockVal.one when many is set): bits 0..31 count
// the memberships.
const (
	hdrStdShift = 32 // header: standard memberships, 24 bits
	hdrStdMask  = 1<<24 - 1
	hdrImplicit = uint64(1) << 62 // header: the implicit form
	hdrNarrow   = uint64(1) << 63 // header: the standard mask is exact
)

// memberBuf is caller storage for the memberships of an implicit member
// array (at most 64: their IDs span fewer than 64), so that reading them
// allocates nothing.
type memberBuf [64]uint64

// hdrWords returns the arena words of the member array of header hdr from
// its mask word on: the mask and every membership, or the mask and the
// first membership in the implicit form.
func hdrWords(hdr uint64) int {
	if hdr&hdrImplicit != 0 {
		return 2
	}
	return 1 + int(uint32(hdr))
}

// memberSlice returns the n memberships starting at p.
func memberSlice(p *uint64, n int) []uint64 { return unsafe.Slice(p, n) }

// stdMask returns the standard mask word of a value with several holders.
func (v *blockVal) stdMask() uint64 { return *(*uint64)(unsafe.Add(unsafe.Pointer(v.many), -8)) }

// implicit reports whether v is a member array in the implicit form.
func (v *blockVal) implicit() bool { return v.many != nil && v.one&hdrImplicit != 0 }

// arrayWords returns the mask word and the memberships of a value with
// several holders, as stored after its header (hdrWords words).
func (v *blockVal) arrayWords() []uint64 {
	return unsafe.Slice((*uint64)(unsafe.Add(unsafe.Pointer(v.many), -8)), hdrWords(v.one))
}

// expand appends the memberships of an implicit array to dst, in order of
// endpoint ID.
func (v *blockVal) expand(dst []uint64) []uint64 {
	m0 := *v.many
	for mask := v.stdMask(); mask != 0; mask &= mask - 1 {
		dst = append(dst, m0+uint64(bits.TrailingZeros64(mask)))
	}
	return dst
}

// isStd reports whether a membership is confirmed and held in the GPU tier
// only: the common case, which Match handles without further decoding.
func isStd(m uint64) bool { return (m>>24)&0x1ff == stdPattern }

// members returns the memberships of v, standard ones first, sorted by
// endpoint ID. buf is caller storage for the inline and implicit cases, so
// no allocation happens.
func (v *blockVal) members(buf *memberBuf) []uint64 {
	switch {
	case v.many == nil:
		if v.one == 0 {
			return nil
		}
		buf[0] = v.one
		return buf[:1]
	case v.one&hdrImplicit != 0:
		return v.expand(buf[:0])
	}
	return unsafe.Slice(v.many, int(uint32(v.one)))
}

// split returns the standard memberships and the others of a value with
// several holders (v.many != nil); buf is storage for an implicit array's.
func (v *blockVal) split(buf *memberBuf) (std, rest []uint64) {
	if v.one&hdrImplicit != 0 {
		return v.expand(buf[:0]), nil
	}
	all := unsafe.Slice(v.many, int(uint32(v.one)))
	nStd := int(v.one >> hdrStdShift & hdrStdMask)
	return all[:nStd], all[nStd:]
}

// find returns the membership of endpoint id and its position in members'
// order, or (0, -1).
func (v *blockVal) find(id uint32) (uint64, int) {
	switch {
	case v.many == nil:
		if v.one != 0 && memberID(v.one) == id {
			return v.one, 0
		}
		return 0, -1
	case v.one&hdrImplicit != 0:
		m0, mask := *v.many, v.stdMask()
		if d := uint64(id) - m0&idMask; d < 64 && mask>>d&1 != 0 {
			return m0 + d, bits.OnesCount64(mask & (1<<d - 1))
		}
		return 0, -1
	}
	for i, m := range unsafe.Slice(v.many, int(uint32(v.one))) {
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
// before reusing the buffer (the block map copies it into its arena). The
// new array takes the implicit form whenever it qualifies.
func (v *blockVal) withBuf(idx int, m uint64, buf *[]uint64) blockVal {
	nOld := v.count()
	n := nOld
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
		if v.many == nil {
			return blockVal{} // unreachable: a single membership removed leaves none
		}
		if v.one&hdrImplicit != 0 {
			// The other of two: the first, or the one of the mask's other bit.
			m0 := *v.many
			if idx == 0 {
				return blockVal{one: m0 + uint64(63-bits.LeadingZeros64(v.stdMask()))}
			}
			return blockVal{one: m0}
		}
		return blockVal{one: memberSlice(v.many, 2)[1-idx]} // removal leaving the other one
	}
	// Build the new array (after its mask word) with the standard
	// memberships first, sorted by endpoint ID. An implicit old array is
	// expanded after it in the same storage.
	size := n + 1
	if v.one&hdrImplicit != 0 && v.many != nil {
		size += nOld
	}
	var words []uint64
	if buf != nil {
		if cap(*buf) < size {
			*buf = make([]uint64, size, 2*size)
		}
		words = (*buf)[:size]
	} else {
		words = make([]uint64, size)
	}
	var single [1]uint64
	var old []uint64
	switch {
	case v.many == nil:
		single[0] = v.one
		old = single[:nOld]
	case v.one&hdrImplicit != 0:
		old = v.expand(words[n+1 : n+1 : size])
	default:
		old = memberSlice(v.many, nOld)
	}
	arr := words[1 : n+1]
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
			if front == n && uniform(arr) {
				hdr |= hdrImplicit
			}
		}
	}
	return blockVal{one: hdr, many: &arr[0]}
}

// uniform reports whether the memberships of ms agree in every bit above
// the endpoint ID, as those of an implicit array do.
func uniform(ms []uint64) bool {
	hi := ms[0] &^ idMask
	for _, m := range ms[1:] {
		if m&^idMask != hi {
			return false
		}
	}
	return true
}
