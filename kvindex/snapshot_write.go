package kvindex

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// WriteSnapshot writes the index to w in the snapshot format (see
// SnapshotFormatVersion): one section per endpoint, each consistent with
// one point of that endpoint's event stream and carrying the endpoint's
// position (see PositionLock).
//
// It never stops Match, and never blocks writers of other endpoints: each
// endpoint is copied on its own, under its PositionLock and its write lock,
// into a buffer that is then written to w with neither lock held. So a slow
// w (a peer on a slow link) delays no event application, and the memory
// used is one endpoint's encoded section (about 20 bytes per entry), never
// a second copy of the index. Endpoints registered after WriteSnapshot
// started may be missing; an endpoint removed meanwhile is skipped.
// Speculative memberships are not written.
func (ix *Index) WriteSnapshot(w io.Writer) (SnapshotInfo, error) {
	info := SnapshotInfo{FormatVersion: SnapshotFormatVersion, KeySchemeVersion: KeySchemeVersion, BlockSize: ix.blockSize}
	cw := &countWriter{w: w}
	var hdr [snapHeaderLen]byte
	copy(hdr[:8], snapMagic)
	binary.LittleEndian.PutUint16(hdr[8:], SnapshotFormatVersion)
	binary.LittleEndian.PutUint16(hdr[10:], KeySchemeVersion)
	binary.LittleEndian.PutUint32(hdr[12:], uint32(ix.blockSize))
	binary.LittleEndian.PutUint32(hdr[16:], 0)
	binary.LittleEndian.PutUint64(hdr[20:], xxhash.Sum64(hdr[:20]))
	if _, err := cw.Write(hdr[:]); err != nil {
		return info, err
	}
	names := ix.snapEndpointNames()
	slices.Sort(names)
	var buf []byte
	for _, name := range names {
		var se SnapshotEndpoint
		var ok bool
		buf, se, ok = ix.encodeSection(buf[:0], name)
		if !ok {
			continue
		}
		if _, err := cw.Write(buf); err != nil {
			return info, err
		}
		info.Endpoints = append(info.Endpoints, se)
		info.Entries += int64(se.Entries)
		info.Memberships += int64(se.Memberships)
	}
	var tr [snapTrailerLen]byte
	tr[0] = snapTagTrailer
	binary.LittleEndian.PutUint32(tr[1:], uint32(len(info.Endpoints)))
	binary.LittleEndian.PutUint64(tr[5:], uint64(info.Entries))
	binary.LittleEndian.PutUint64(tr[13:], uint64(info.Memberships))
	binary.LittleEndian.PutUint64(tr[21:], xxhash.Sum64(tr[:21]))
	if _, err := cw.Write(tr[:]); err != nil {
		return info, err
	}
	info.Bytes = cw.n
	return info, nil
}

// encodeSection appends the framed section of endpoint name to buf, taking
// its PositionLock and then its write lock. ok is false when the endpoint
// has neither entries nor a position (nothing to write).
func (ix *Index) encodeSection(buf []byte, name string) (_ []byte, se SnapshotEndpoint, ok bool) {
	if len(name) == 0 || len(name) > MaxSnapshotNameBytes {
		return buf, se, false // not representable; such names never come from kvevents
	}
	pl := ix.positionLock(name, false)
	if pl != nil {
		pl.mu.Lock()
		defer pl.mu.Unlock()
	}
	ep, _ := ix.lockEndpoint(name, false)
	if ep != nil {
		defer ep.mu.Unlock()
	}
	hasPos := pl != nil && pl.has
	if !hasPos && (ep == nil || !snapHasEntries(ep)) {
		return buf, se, false
	}
	se = SnapshotEndpoint{Name: name, HasPosition: hasPos}
	buf = append(buf, snapTagSection, 0, 0, 0, 0) // length patched below
	start := len(buf)
	buf = binary.AppendUvarint(buf, uint64(len(name)))
	buf = append(buf, name...)
	if hasPos {
		se.Position = append([]byte(nil), pl.pos...)
		buf = binary.AppendUvarint(buf, uint64(len(pl.pos))+1)
		buf = append(buf, pl.pos...)
	} else {
		buf = binary.AppendUvarint(buf, 0)
	}
	tiers := ix.snapTierNames()
	buf = binary.AppendUvarint(buf, uint64(len(tiers)))
	for _, t := range tiers {
		buf = binary.AppendUvarint(buf, uint64(len(t)))
		buf = append(buf, t...)
	}
	if ep == nil {
		buf = binary.AppendUvarint(buf, 0)
	} else {
		buf = binary.AppendUvarint(buf, uint64(snapEntryCount(ep)))
		ix.snapEntries(ep, func(h uint64, key Key, pairs []pair) {
			buf = binary.LittleEndian.AppendUint64(buf, h)
			buf = binary.LittleEndian.AppendUint64(buf, uint64(key))
			buf = binary.AppendUvarint(buf, uint64(len(pairs)))
			for _, p := range pairs {
				buf = append(buf, p.tier)
				buf = binary.AppendUvarint(buf, uint64(int64(p.group)+1))
				buf = binary.AppendUvarint(buf, uint64(p.count))
			}
			se.Entries++
			if len(pairs) > 0 {
				se.Memberships++
			}
		})
	}
	buf = ix.encodeGroups(buf, name, ep != nil, &se)
	n := len(buf) - start
	if uint64(n) > 1<<32-1 {
		panic(fmt.Sprintf("kvindex: snapshot section of %d bytes", n)) // bounded by MaxBlocksPerEndpoint in practice
	}
	binary.LittleEndian.PutUint32(buf[start-4:], uint32(n))
	buf = binary.LittleEndian.AppendUint64(buf, xxhash.Sum64(buf[start-5:]))
	return buf, se, true
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
