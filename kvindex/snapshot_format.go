package kvindex

import (
	"errors"
	"fmt"
)

// Snapshot format, version 2 (version 1 is still read). All integers are little-endian; "uvarint" is
// Go's encoding/binary unsigned varint. The checksum is XXH64 (seed 0).
//
//	header   magic "KVRSNAP\x00" (8 bytes)
//	         format version    u16 (SnapshotFormatVersion)
//	         key-scheme version u16 (KeySchemeVersion)
//	         block size        u32
//	         flags             u32 (0; a reader refuses other values)
//	         checksum          u64 of the 20 bytes above
//	section  tag 0x01, body length u32, body, checksum u64 of tag ‖ length ‖ body
//	         (one per endpoint)
//	trailer  tag 0x02, sections u32, entries u64, memberships u64,
//	         checksum u64 of the 21 bytes before it; then end of input
//
// A section body is one endpoint at one point of its event stream:
//
//	name        uvarint length (1 … MaxSnapshotNameBytes), bytes
//	position    uvarint length (0 … MaxPositionBytes) + 1, bytes; 0 = none
//	tiers       uvarint count (0 … 8), then per tier: uvarint length
//	            (1 … 64), bytes — the tier names the entries refer to
//	entries     uvarint count (0 … the reading index's MaxBlocksPerEndpoint),
//	            then per engine hash, oldest first:
//	            engine hash u64, router key u64, uvarint pair count
//	            (0 … maxSnapshotPairs), then per pair: tier u8 (index into
//	            tiers), uvarint group+1 (0 = ungrouped), uvarint count (≥ 1)
//
//	groups      (version 2 only) uvarint count (0 … 64, maxGroupsTracked;
//	            earlier kvroute tracked 8 and refuses more), then per non-prefix
//	            cache group (groups.go): uvarint group index (0 … 2^31−1),
//	            kind u8 (1 = sliding window, 2 = Mamba), uvarint window in
//	            tokens (sliding window ≥ 1; Mamba 0), uvarint entry count
//	            (0 … the reading index's MaxBlocksPerEndpoint), then per
//	            engine hash: engine hash u64, router key u64 (≠ 0), uvarint
//	            store count (1 … 2^31)
//
// A key mapped from several engine hashes is listed with its pairs under
// each of them. Speculative memberships are never written (they describe a
// routing decision of this router, not the engine's cache). Version 1 is
// version 2 without the groups part: a version-1 snapshot (an older
// router's checkpoint or peer) loads with no groups, as its writer had
// none; a version-2 snapshot is refused by a version-1 reader
// (ErrSnapshotVersion), which then rebuilds from the engines instead.
const (
	// SnapshotFormatVersion is the version of the snapshot format this
	// package writes. It reads it and version 1.
	SnapshotFormatVersion = 2
	// snapFormatV1 is the format without non-prefix groups.
	snapFormatV1 = 1
	// MaxSnapshotNameBytes bounds an endpoint name in a snapshot.
	MaxSnapshotNameBytes = 1024
	// DefaultMaxSnapshotSectionBytes bounds one endpoint section a reader
	// accepts when SnapshotReadOptions.MaxSectionBytes is zero.
	DefaultMaxSnapshotSectionBytes = 1 << 30
	// DefaultMaxSnapshotEndpoints bounds the endpoint sections of one
	// snapshot a reader accepts when SnapshotReadOptions.MaxEndpoints is
	// zero: far more endpoints than one router's pool holds.
	DefaultMaxSnapshotEndpoints = 16384

	snapMagic       = "KVRSNAP\x00"
	snapHeaderLen   = 8 + 2 + 2 + 4 + 4 + 8
	snapTagSection  = 0x01
	snapTagTrailer  = 0x02
	snapTrailerLen  = 1 + 4 + 8 + 8 + 8
	maxSnapTierName = 64
	// maxSnapshotPairs bounds the (tier, group) pairs of one membership:
	// every tier in up to 256 cache groups.
	maxSnapshotPairs = maxTiers * 256
	// maxSnapshotCount bounds a pair's reference count (the index counts
	// up to 2^31).
	maxSnapshotCount = 1 << 31
)

// Sentinel errors of snapshot reading, wrapped in a *SnapshotError; test
// with errors.Is.
var (
	// ErrSnapshotTruncated: the input ended before the trailer.
	ErrSnapshotTruncated = errors.New("kvindex: snapshot truncated")
	// ErrSnapshotChecksum: a header, section or trailer checksum does not
	// match its bytes.
	ErrSnapshotChecksum = errors.New("kvindex: snapshot checksum mismatch")
	// ErrSnapshotMagic: the input is not a kvroute index snapshot.
	ErrSnapshotMagic = errors.New("kvindex: not a kvroute index snapshot")
	// ErrSnapshotVersion: the snapshot's format version or flags are not
	// the ones this package reads.
	ErrSnapshotVersion = errors.New("kvindex: unsupported snapshot format version")
	// ErrSnapshotKeyScheme: the snapshot's keys were computed under another
	// key scheme (KeySchemeVersion), so they would never match requests.
	ErrSnapshotKeyScheme = errors.New("kvindex: snapshot key scheme differs from this index's")
	// ErrSnapshotBlockSize: the snapshot's block size differs from the
	// index's.
	ErrSnapshotBlockSize = errors.New("kvindex: snapshot block size differs from the index block size")
	// ErrSnapshotMalformed: a section or trailer is inconsistent (a count
	// out of bounds, a bad tier reference, trailing bytes, counts that
	// disagree with the sections).
	ErrSnapshotMalformed = errors.New("kvindex: malformed snapshot")
	// ErrSnapshotTooLarge: a section exceeds the reader's bounds (bytes,
	// or more blocks than the index's per-endpoint capacity), or the
	// snapshot has more sections than SnapshotReadOptions.MaxEndpoints.
	ErrSnapshotTooLarge = errors.New("kvindex: snapshot section exceeds the reader's bounds")
	// ErrSnapshotConflict: the snapshot names an endpoint the index already
	// holds entries for. A snapshot is loaded into a starting index only.
	ErrSnapshotConflict = errors.New("kvindex: snapshot endpoint already present in the index")
	// ErrSnapshotRead: the underlying reader failed.
	ErrSnapshotRead = errors.New("kvindex: snapshot read failed")
)

// Reasons of a SnapshotError, usable as metric label values (for example a
// checkpoint's load outcome).
const (
	SnapshotReasonTruncated = "truncated"
	SnapshotReasonChecksum  = "checksum"
	SnapshotReasonMagic     = "bad_magic"
	SnapshotReasonVersion   = "format_version"
	SnapshotReasonKeyScheme = "key_scheme"
	SnapshotReasonBlockSize = "block_size"
	SnapshotReasonMalformed = "malformed"
	SnapshotReasonTooLarge  = "too_large"
	SnapshotReasonConflict  = "conflict"
	SnapshotReasonRead      = "read_error"
)

// SnapshotError is a snapshot the reader refused. Reason is a stable metric
// label, Err one of the ErrSnapshot* sentinels, Detail what exactly was
// wrong and Offset the byte offset in the input where it was found.
type SnapshotError struct {
	Reason string
	Err    error
	Detail string
	Offset int64
	Cause  error // the reader's error for ErrSnapshotRead
}

// Error describes the refusal.
func (e *SnapshotError) Error() string {
	s := fmt.Sprintf("%v at byte %d", e.Err, e.Offset)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap returns the sentinel error and the cause.
func (e *SnapshotError) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Err, e.Cause}
	}
	return []error{e.Err}
}

// snapReason maps a sentinel to its reason label.
func snapReason(err error) string {
	switch err {
	case ErrSnapshotTruncated:
		return SnapshotReasonTruncated
	case ErrSnapshotChecksum:
		return SnapshotReasonChecksum
	case ErrSnapshotMagic:
		return SnapshotReasonMagic
	case ErrSnapshotVersion:
		return SnapshotReasonVersion
	case ErrSnapshotKeyScheme:
		return SnapshotReasonKeyScheme
	case ErrSnapshotBlockSize:
		return SnapshotReasonBlockSize
	case ErrSnapshotTooLarge:
		return SnapshotReasonTooLarge
	case ErrSnapshotConflict:
		return SnapshotReasonConflict
	case ErrSnapshotRead:
		return SnapshotReasonRead
	}
	return SnapshotReasonMalformed
}

// SnapshotEndpoint describes one endpoint section of a snapshot.
type SnapshotEndpoint struct {
	Name        string
	Position    []byte // the endpoint's stream position (opaque), nil without
	HasPosition bool
	Entries     int // engine-hash entries
	Memberships int // entries listed with confirmed pairs
	// Groups and GroupEntries count the endpoint's non-prefix cache groups
	// and their engine-hash entries (format version 2).
	Groups       int
	GroupEntries int
}

// SnapshotInfo summarises a snapshot written or read.
type SnapshotInfo struct {
	FormatVersion    int
	KeySchemeVersion int
	BlockSize        int
	Endpoints        []SnapshotEndpoint // in section order
	Entries          int64              // engine-hash entries over all sections
	Memberships      int64              // entries listed with confirmed pairs
	Bytes            int64              // bytes written or read
}
