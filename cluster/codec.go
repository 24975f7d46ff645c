package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"

	"github.com/kvroute/kvroute/kvindex"
)

// Wire formats. Both are compact binary, little-endian, with unsigned
// varints for lengths and counts and zigzag varints (svarint) for signed
// values:
//
//	record   := 'R' version(2) snapshotURL:str sentMs:uvarint seq:uvarint n:uvarint { endpoint:str tokens:uvarint requests:uvarint }×n
//	            [ q:uvarint { priority:svarint requests:uvarint }×q ]
//	decision := 'D' version(2) sender:str n:uvarint { endpoint:str k:uvarint key:8 bytes ×k }×n
//	            [ firstSeq:uvarint m:uvarint { endpoint:str tokens:svarint requests:svarint }×m ]
//	str      := len:uvarint bytes
//
// A record is one replica's membership and load (the value of its leased
// key); seq is the last load change (delta) its totals include. A decision
// message carries one or more routing decisions (the chosen endpoint and the
// request's leading block keys) and then the sender's load changes since
// its previous message, numbered firstSeq, firstSeq+1, ... A record's
// optional last section is the replica's admission queue depth per priority
// band (queues.go), written only while some band has requests waiting, so
// a record of a replica with empty queues is what it was before the section
// existed. Version 1 (no seq in a record, no load changes in a message) is
// still decoded.
const (
	recordMagic   = 'R'
	decisionMagic = 'D'
	wireVersion   = 2
	// wireVersion1 is the previous format, still accepted.
	wireVersion1 = 1
	// maxRecordBytes bounds a record read from Redis.
	maxRecordBytes = 1 << 20
	// maxMessageBytes bounds a decision message, published or received.
	maxMessageBytes = 1 << 20
)

// errMalformed is wrapped by every decoding error.
var errMalformed = errors.New("cluster: malformed message")

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// reader decodes the wire formats; every read is bounds-checked.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", errMalformed, what)
	}
}

func (r *reader) byte1(what string) byte {
	if r.err != nil || len(r.b) < 1 {
		r.fail(what)
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a count of items of at least minBytes each, capped by limit.
func (r *reader) count(what string, limit, minBytes int) int {
	v := r.uvarint(what)
	if r.err != nil {
		return 0
	}
	if v > uint64(limit) || v*uint64(minBytes) > uint64(len(r.b)) {
		r.fail(fmt.Sprintf("%s %d over the limit or the message", what, v))
		return 0
	}
	return int(v)
}

func (r *reader) bytes(what string, limit int) []byte {
	n := r.count(what, limit, 1)
	if r.err != nil {
		return nil
	}
	s := r.b[:n]
	r.b = r.b[n:]
	return s
}

// Record is one replica's published state, as read from Redis.
type Record struct {
	SnapshotURL string
	SentMs      uint64
	// Seq is the sequence number of the last load change the totals include
	// (0 in a version-1 record).
	Seq   uint64
	Loads []EndpointLoad
	// Queues is the replica's admission queue depth per priority band, the
	// bands with requests waiting only (see ShareQueues).
	Queues []QueueDepth
}

// EndpointLoad is one endpoint's in-flight load in a record.
type EndpointLoad struct {
	Endpoint string
	Tokens   int64
	Requests int64
}

func encodeRecord(b []byte, snapshotURL string, sentMs, seq uint64, loads []EndpointLoad, queues []QueueDepth) []byte {
	b = append(b, recordMagic, wireVersion)
	b = appendStr(b, snapshotURL)
	b = binary.AppendUvarint(b, sentMs)
	b = binary.AppendUvarint(b, seq)
	b = binary.AppendUvarint(b, uint64(len(loads)))
	for _, l := range loads {
		b = appendStr(b, l.Endpoint)
		b = binary.AppendUvarint(b, uint64(max(l.Tokens, 0)))
		b = binary.AppendUvarint(b, uint64(max(l.Requests, 0)))
	}
	if len(queues) > 0 {
		b = binary.AppendUvarint(b, uint64(len(queues)))
		for _, q := range queues {
			b = binary.AppendVarint(b, int64(q.Priority))
			b = binary.AppendUvarint(b, uint64(max(q.Requests, 0)))
		}
	}
	return b
}

// decodeRecord decodes a record of at most maxEndpoints endpoints.
func decodeRecord(data []byte, maxEndpoints int) (Record, error) {
	if len(data) > maxRecordBytes {
		return Record{}, fmt.Errorf("%w: record of %d bytes over %d", errMalformed, len(data), maxRecordBytes)
	}
	r := reader{b: data}
	magic, version := r.byte1("magic"), r.byte1("version")
	if magic != recordMagic || (version != wireVersion && version != wireVersion1) {
		r.fail("not a version-1 or -2 record")
		return Record{}, r.err
	}
	var rec Record
	rec.SnapshotURL = string(r.bytes("snapshot URL", maxNameBytes))
	rec.SentMs = r.uvarint("sent time")
	if version == wireVersion {
		rec.Seq = r.uvarint("sequence")
	}
	n := r.count("endpoint count", maxEndpoints, 3)
	if r.err == nil && n > 0 {
		rec.Loads = make([]EndpointLoad, 0, n)
	}
	for i := 0; i < n && r.err == nil; i++ {
		ep := r.bytes("endpoint", maxNameBytes)
		tok, req := r.uvarint("tokens"), r.uvarint("requests")
		if r.err == nil && (len(ep) == 0 || tok > 1<<62 || req > 1<<62) {
			r.fail("empty endpoint or load out of range")
		}
		if r.err == nil {
			rec.Loads = append(rec.Loads, EndpointLoad{Endpoint: string(ep), Tokens: int64(tok), Requests: int64(req)})
		}
	}
	if version == wireVersion && r.err == nil && len(r.b) != 0 {
		rec.Queues = r.queues()
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return Record{}, r.err
	}
	return rec, nil
}

// appendDecisionHeader starts a decision message from sender holding n
// decisions.
func appendDecisionHeader(b []byte, sender string, n int) []byte {
	b = append(b, decisionMagic, wireVersion)
	b = appendStr(b, sender)
	return binary.AppendUvarint(b, uint64(n))
}

// appendDecision appends one decision to a message.
func appendDecision(b []byte, endpoint string, keys []kvindex.Key) []byte {
	b = appendStr(b, endpoint)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = binary.LittleEndian.AppendUint64(b, uint64(k))
	}
	return b
}

// uvarintLen is the length of x as an unsigned varint.
func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// varintLen is the length of x as a zigzag (signed) varint.
func varintLen(x int64) int { return uvarintLen(uint64(x<<1) ^ uint64(x>>63)) }

// messageOverhead is the most a decision message from sender holds besides
// its decisions and load changes: the header with any decision count, and
// the load changes' first number and count.
func messageOverhead(sender string) int {
	return 2 + uvarintLen(uint64(len(sender))) + len(sender) + 3*binary.MaxVarintLen64
}

// decisionWireBytes is what appendDecision appends for a decision of keys
// keys whose endpoint name is endpointLen bytes.
func decisionWireBytes(endpointLen, keys int) int {
	return uvarintLen(uint64(endpointLen)) + endpointLen + uvarintLen(uint64(keys)) + 8*keys
}

// maxDecisionKeys is the most keys a decision of the replica sender can
// carry and still fit a message of its own, whatever endpoint name a peer
// accepts (up to maxNameBytes): over 130,000 (the key count's varint takes
// 3 bytes at most below 2^21).
func maxDecisionKeys(sender string) int {
	return (maxMessageBytes - messageOverhead(sender) - decisionWireBytes(maxNameBytes, 0) + 1 - 3) / 8
}

// deltaWireBytes is what appendDeltas appends for one load change.
func deltaWireBytes(d delta) int {
	return uvarintLen(uint64(len(d.endpoint))) + len(d.endpoint) + varintLen(d.tokens) + varintLen(d.requests)
}

// appendDeltas appends the message's load changes, numbered from
// firstSeq; a message without any has none of this section.
func appendDeltas(b []byte, firstSeq uint64, deltas []delta) []byte {
	b = binary.AppendUvarint(b, firstSeq)
	b = binary.AppendUvarint(b, uint64(len(deltas)))
	for _, d := range deltas {
		b = appendStr(b, d.endpoint)
		b = binary.AppendVarint(b, d.tokens)
		b = binary.AppendVarint(b, d.requests)
	}
	return b
}

func (r *reader) varint(what string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// decodeDecisions decodes a decision message and calls fn for each decision
// (the keys slice is reused between calls) and onDelta (when not nil) for
// each load change. It stops at the first error; what came before it was
// delivered.
func decodeDecisions(data []byte, maxKeys int, scratch []kvindex.Key, fn func(sender, endpoint []byte, keys []kvindex.Key),
	onDelta func(sender, endpoint []byte, seq uint64, tokens, requests int64)) ([]kvindex.Key, error) {
	if len(data) > maxMessageBytes {
		return scratch, fmt.Errorf("%w: message of %d bytes over %d", errMalformed, len(data), maxMessageBytes)
	}
	r := reader{b: data}
	magic, version := r.byte1("magic"), r.byte1("version")
	if magic != decisionMagic || (version != wireVersion && version != wireVersion1) {
		r.fail("not a version-1 or -2 decision message")
		return scratch, r.err
	}
	sender := r.bytes("sender", maxNameBytes)
	n := r.count("decision count", maxMessageBytes, 3)
	for i := 0; i < n && r.err == nil; i++ {
		ep := r.bytes("endpoint", maxNameBytes)
		k := r.count("key count", maxKeys, 8)
		if r.err == nil && len(ep) == 0 {
			r.fail("empty endpoint")
		}
		if r.err != nil {
			break
		}
		scratch = scratch[:0]
		for j := 0; j < k; j++ {
			scratch = append(scratch, kvindex.Key(binary.LittleEndian.Uint64(r.b[8*j:])))
		}
		r.b = r.b[8*k:]
		fn(sender, ep, scratch)
	}
	if version == wireVersion && r.err == nil && len(r.b) != 0 {
		first := r.uvarint("first sequence")
		m := r.count("load change count", maxMessageBytes, 3)
		if r.err == nil && first+uint64(m) < first {
			r.fail("sequence overflows")
		}
		for i := 0; i < m && r.err == nil; i++ {
			ep := r.bytes("endpoint", maxNameBytes)
			tok, req := r.varint("tokens"), r.varint("requests")
			if r.err == nil && (len(ep) == 0 || tok > 1<<62 || tok < -(1<<62) || req > 1<<62 || req < -(1<<62)) {
				r.fail("empty endpoint or load change out of range")
			}
			if r.err == nil && onDelta != nil {
				onDelta(sender, ep, first+uint64(i), tok, req)
			}
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	return scratch, r.err
}
