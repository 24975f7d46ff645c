package kvindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// SnapshotReadOptions bound what ReadSnapshot accepts; the zero value is
// valid.
type SnapshotReadOptions struct {
	// MaxSectionBytes bounds one endpoint section (default
	// DefaultMaxSnapshotSectionBytes). A section is held whole until its
	// checksum and contents are checked, so this is the reader's memory
	// bound: a section of N bytes costs N bytes plus at most 1 MiB, in
	// pieces allocated only as its bytes arrive (a forged length on a
	// short input costs what arrived plus one piece).
	MaxSectionBytes int64
	// MaxEndpoints bounds the endpoint sections a snapshot may hold
	// (default DefaultMaxSnapshotEndpoints); one more is refused
	// (ErrSnapshotTooLarge) and the snapshot with it. A section is loaded
	// once checked, and an endpoint that holds no entries (a name and a
	// position) costs the index memory its byte bound does not see, so
	// without this bound a snapshot of many small sections grew the
	// reader's memory with its length.
	MaxEndpoints int

	pieceMax int // largest piece of a section (0: snapPieceMax); tests set tiny pieces
}

// ReadSnapshot loads a snapshot written by WriteSnapshot into ix and
// returns what it contained, endpoint positions included (the caller
// resumes each endpoint's event stream from its position).
//
// Everything is validated: magic, format version, flags, key-scheme
// version and block size (against this index), every checksum, every
// count (bounded before anything is allocated for it: names, positions,
// tiers, pairs, and entries against the index's MaxBlocksPerEndpoint;
// sections against SnapshotReadOptions.MaxEndpoints), the trailer's
// totals, and the end of input after it.
//
// A snapshot loads whole or not at all: each section is buffered and its
// checksum verified before any of it is applied, and when a later section,
// the trailer or the end of input fails validation (truncation, corruption,
// a peer that dies mid-stream) every endpoint already loaded from this
// snapshot is cleared again before the error is returned. Meant for an
// index that is starting: an endpoint the index already holds entries or a
// position for is refused (ErrSnapshotConflict), and while ReadSnapshot
// runs, Match may see the sections loaded so far.
//
// Errors are *SnapshotError values wrapping an ErrSnapshot* sentinel.
func (ix *Index) ReadSnapshot(r io.Reader, opts SnapshotReadOptions) (info SnapshotInfo, err error) {
	maxSec := opts.MaxSectionBytes
	if maxSec <= 0 {
		maxSec = DefaultMaxSnapshotSectionBytes
	}
	maxEps := opts.MaxEndpoints
	if maxEps <= 0 {
		maxEps = DefaultMaxSnapshotEndpoints
	}
	cr := &countReader{r: r}
	var loaded []string
	names := map[string]struct{}{} // the sections' endpoints so far
	defer func() {
		if err != nil {
			ix.rollback(loaded)
			info.Endpoints, info.Entries, info.Memberships = nil, 0, 0
		}
		info.Bytes = cr.n
	}()
	fail := func(sentinel error, format string, args ...any) error {
		return &SnapshotError{Reason: snapReason(sentinel), Err: sentinel, Detail: fmt.Sprintf(format, args...), Offset: cr.n}
	}
	readFull := func(p []byte, what string) error {
		if _, err := io.ReadFull(cr, p); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return fail(ErrSnapshotTruncated, "reading %s", what)
			}
			e := fail(ErrSnapshotRead, "reading %s", what).(*SnapshotError)
			e.Cause = err
			return e
		}
		return nil
	}

	var hdr [snapHeaderLen]byte
	if err := readFull(hdr[:], "header"); err != nil {
		return info, err
	}
	if string(hdr[:8]) != snapMagic {
		return info, fail(ErrSnapshotMagic, "magic %q", hdr[:8])
	}
	if xxhash.Sum64(hdr[:20]) != binary.LittleEndian.Uint64(hdr[20:]) {
		return info, fail(ErrSnapshotChecksum, "header")
	}
	info.FormatVersion = int(binary.LittleEndian.Uint16(hdr[8:]))
	info.KeySchemeVersion = int(binary.LittleEndian.Uint16(hdr[10:]))
	info.BlockSize = int(binary.LittleEndian.Uint32(hdr[12:]))
	switch flags := binary.LittleEndian.Uint32(hdr[16:]); {
	case info.FormatVersion != SnapshotFormatVersion && info.FormatVersion != snapFormatV1:
		return info, fail(ErrSnapshotVersion, "format version %d, this reader reads %d and %d",
			info.FormatVersion, snapFormatV1, SnapshotFormatVersion)
	case flags != 0:
		return info, fail(ErrSnapshotVersion, "unknown flags %#x", flags)
	case info.KeySchemeVersion != KeySchemeVersion:
		return info, fail(ErrSnapshotKeyScheme, "key scheme %d, this index uses %d", info.KeySchemeVersion, KeySchemeVersion)
	case info.BlockSize != ix.blockSize:
		return info, fail(ErrSnapshotBlockSize, "block size %d, this index uses %d", info.BlockSize, ix.blockSize)
	}

	var body sectionBuf
	body.max = opts.pieceMax
	body.version = info.FormatVersion
	var frame [5]byte
	var sum [8]byte
	for {
		if err := readFull(frame[:1], "section tag"); err != nil {
			return info, err
		}
		if frame[0] == snapTagTrailer {
			break
		}
		if frame[0] != snapTagSection {
			return info, fail(ErrSnapshotMalformed, "unknown section tag %#x", frame[0])
		}
		if len(info.Endpoints) >= maxEps {
			return info, fail(ErrSnapshotTooLarge, "more than %d endpoint sections", maxEps)
		}
		if err := readFull(frame[1:], "section length"); err != nil {
			return info, err
		}
		n := int64(binary.LittleEndian.Uint32(frame[1:]))
		if n > maxSec {
			return info, fail(ErrSnapshotTooLarge, "section of %d bytes, limit %d", n, maxSec)
		}
		d := xxhash.New()
		_, _ = d.Write(frame[:])
		if got, err := body.read(cr, n, d); err != nil {
			if errors.Is(err, io.EOF) {
				return info, fail(ErrSnapshotTruncated, "section body: %d of %d bytes", got, n)
			}
			e := fail(ErrSnapshotRead, "section body").(*SnapshotError)
			e.Cause = err
			return info, e
		}
		if err := readFull(sum[:], "section checksum"); err != nil {
			return info, err
		}
		if d.Sum64() != binary.LittleEndian.Uint64(sum[:]) {
			return info, fail(ErrSnapshotChecksum, "section %d", len(info.Endpoints))
		}
		se, err := ix.checkSection(&body)
		if err != nil {
			sentinel := ErrSnapshotMalformed
			if errors.Is(err, ErrSnapshotTooLarge) {
				sentinel = ErrSnapshotTooLarge
			}
			return info, fail(sentinel, "section %d: %s", len(info.Endpoints),
				strings.TrimPrefix(err.Error(), sentinel.Error()+": "))
		}
		if _, twice := names[se.Name]; twice {
			// Checked by name, not by what the index now holds: a section
			// of groups alone leaves no entry occupied sees, and loaded
			// twice it would count its groups' stores twice.
			return info, fail(ErrSnapshotMalformed, "section %d: endpoint %q twice", len(info.Endpoints), se.Name)
		}
		if ix.occupied(se.Name) {
			return info, fail(ErrSnapshotConflict, "endpoint %q", se.Name)
		}
		names[se.Name] = struct{}{}
		loaded = append(loaded, se.Name)
		ix.loadSection(&body)
		info.Endpoints = append(info.Endpoints, se)
		info.Entries += int64(se.Entries)
		info.Memberships += int64(se.Memberships)
	}
	var tr [snapTrailerLen]byte
	tr[0] = snapTagTrailer
	if err := readFull(tr[1:], "trailer"); err != nil {
		return info, err
	}
	if xxhash.Sum64(tr[:21]) != binary.LittleEndian.Uint64(tr[21:]) {
		return info, fail(ErrSnapshotChecksum, "trailer")
	}
	secs := binary.LittleEndian.Uint32(tr[1:])
	ents := binary.LittleEndian.Uint64(tr[5:])
	mems := binary.LittleEndian.Uint64(tr[13:])
	if uint64(secs) != uint64(len(info.Endpoints)) || ents != uint64(info.Entries) || mems != uint64(info.Memberships) {
		return info, fail(ErrSnapshotMalformed, "trailer counts %d sections, %d entries, %d memberships; read %d, %d, %d",
			secs, ents, mems, len(info.Endpoints), info.Entries, info.Memberships)
	}
	var one [1]byte
	switch n, err := io.ReadFull(cr, one[:]); {
	case n > 0:
		return info, fail(ErrSnapshotMalformed, "bytes after the trailer")
	case err != io.EOF:
		e := fail(ErrSnapshotRead, "after the trailer").(*SnapshotError)
		e.Cause = err
		return info, e
	}
	return info, nil
}

// occupied reports whether the index holds entries or a position for name.
func (ix *Index) occupied(name string) bool {
	if _, ok := ix.Position(name); ok {
		return true
	}
	ep, _ := ix.lockEndpoint(name, false)
	if ep == nil {
		return false
	}
	defer ep.mu.Unlock()
	return snapHasEntries(ep)
}

// rollback clears the endpoints a failed ReadSnapshot loaded.
func (ix *Index) rollback(names []string) {
	for _, name := range names {
		pl := ix.LockPosition(name)
		ix.Clear(name)
		pl.Clear()
		pl.Unlock()
		ix.ForgetPosition(name)
	}
}

// sectionVisitor receives a section's contents as it is parsed.
type sectionVisitor struct {
	header func(name string, pos []byte, hasPos bool, tiers []string)
	entry  func(hash uint64, key Key, pairs []pair)
	// group and groupEntry receive the non-prefix groups (version 2).
	group      func(index int32, kind GroupKind, window int)
	groupEntry func(hash uint64, key Key, count uint32)
}

// parseSection parses and bounds-checks a section body, calling v (when
// set) for its parts.
func (ix *Index) parseSection(b *sectionBuf, v *sectionVisitor) (se SnapshotEndpoint, err error) {
	c := b.cursor()
	name := string(c.bytes("name", c.uvarint("name length", MaxSnapshotNameBytes)))
	if c.err == nil && len(name) == 0 {
		c.failf("empty endpoint name")
	}
	posLen := c.uvarint("position length", MaxPositionBytes+1)
	var pos []byte
	if posLen > 0 {
		pos = append([]byte{}, c.bytes("position", posLen-1)...)
	}
	nt := c.uvarint("tier count", maxTiers)
	var tierBuf [maxTiers]string
	tiers := tierBuf[:0]
	for i := uint64(0); i < nt && c.err == nil; i++ {
		t := c.bytes("tier name", c.uvarint("tier name length", maxSnapTierName))
		if c.err == nil && len(t) == 0 {
			c.failf("empty tier name")
		}
		tiers = append(tiers, string(t))
	}
	if c.err != nil {
		return se, c.err
	}
	se = SnapshotEndpoint{Name: name, HasPosition: posLen > 0, Position: pos}
	if v != nil && v.header != nil {
		v.header(se.Name, pos, se.HasPosition, tiers)
	}
	ne := c.uvarint("entry count", 1<<62)
	if c.err != nil {
		return se, c.err
	}
	if ne > uint64(ix.maxBlocks) {
		return se, fmt.Errorf("%w: endpoint %q has %d blocks, this index holds at most %d per endpoint",
			ErrSnapshotTooLarge, se.Name, ne, ix.maxBlocks)
	}
	if ne > uint64(c.left)/17 { // an entry takes at least 17 bytes
		return se, fmt.Errorf("%w: %d entries in %d bytes", ErrSnapshotMalformed, ne, c.left)
	}
	var pairBuf [16]pair
	for i := uint64(0); i < ne && c.err == nil; i++ {
		h := c.u64("engine hash")
		key := Key(c.u64("key"))
		np := c.uvarint("pair count", maxSnapshotPairs)
		pairs := pairBuf[:0]
		for j := uint64(0); j < np && c.err == nil; j++ {
			tier := c.u8("tier")
			g := c.uvarint("group", 1<<31)
			cnt := c.uvarint("count", maxSnapshotCount)
			if c.err != nil {
				break
			}
			switch {
			case int(tier) >= len(tiers):
				c.failf("tier %d of %d", tier, len(tiers))
			case cnt == 0:
				c.failf("zero reference count")
			}
			pairs = append(pairs, pair{tier: tier, group: int32(int64(g) - 1), count: uint32(cnt)})
		}
		if c.err != nil {
			break
		}
		se.Entries++
		if np > 0 {
			se.Memberships++
		}
		if v != nil && v.entry != nil {
			v.entry(h, key, pairs)
		}
	}
	if c.err == nil && b.version != snapFormatV1 {
		ix.parseGroups(c, v, &se)
	}
	if c.err == nil && c.left != 0 {
		c.failf("%d bytes after the entries", c.left)
	}
	return se, c.err
}

// checkSection validates a section body without applying it. Errors wrap
// ErrSnapshotMalformed or ErrSnapshotTooLarge.
func (ix *Index) checkSection(b *sectionBuf) (SnapshotEndpoint, error) {
	return ix.parseSection(b, nil)
}

// loadSection applies a validated section body: the endpoint's position,
// then its entries in order.
func (ix *Index) loadSection(b *sectionBuf) {
	var pl *PositionLock
	var ep *endpoint
	var tierMap [maxTiers]uint8
	var mapped []pair
	var gl groupLoader
	_, _ = ix.parseSection(b, &sectionVisitor{
		header: func(name string, pos []byte, hasPos bool, tiers []string) {
			pl = ix.LockPosition(name)
			if hasPos {
				pl.Set(pos)
			}
			for i, t := range tiers {
				tierMap[i], _ = ix.tierID(t, true)
			}
			ep, _ = ix.lockEndpoint(name, true) // nil only beyond 2^24 endpoints
		},
		entry: func(h uint64, key Key, pairs []pair) {
			if ep == nil {
				return
			}
			mapped = mapped[:0]
			for _, p := range pairs {
				mapped = addPairs(mapped, tierMap[p.tier], p.group, p.count)
			}
			ix.snapRestoreEntry(ep, h, key, mapped)
		},
		group: func(index int32, kind GroupKind, window int) {
			if ep != nil {
				gl.group(ix, ep.name, index, kind, window)
			}
		},
		groupEntry: gl.entry,
	})
	gl.finish(ix)
	if ep != nil {
		ix.account(ep)
		ep.mu.Unlock()
	}
	if pl != nil {
		pl.Unlock()
	}
	ix.enforceMemory()
}

// addPairs adds count stores of (tier, group) to pairs, merging a pair the
// snapshot lists twice (or two snapshot tiers that share one tier ID here).
func addPairs(pairs []pair, tier uint8, group int32, count uint32) []pair {
	for i := range pairs {
		if pairs[i].tier == tier && pairs[i].group == group {
			pairs[i].count = uint32(min(uint64(pairs[i].count)+uint64(count), maxSnapshotCount))
			return pairs
		}
	}
	return append(pairs, pair{tier: tier, group: group, count: count})
}

// countReader counts the bytes read through it.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
