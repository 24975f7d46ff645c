// This file is the whole of vLLM's KV-cache snapshot wire protocol as
// kvroute speaks it; nothing else in kvroute knows its frames. It follows
// vLLM's KVEventSnapshotRecorder (vllm/distributed/kv_events_snapshot.py,
// the snapshot work of vllm-project/vllm#57789) in the revision that names
// the request SNAPSHOT_REQUEST and draws the publisher identity from
// uuid4, and the example subscriber
// examples/features/kv_events/kv_events_snapshot_subscriber.py at commit
// 2c481a4b6a52d6d1f30d3c9d937443ba35956cd9. An earlier recorder revision
// (commit 0aa3ce853c7d2c9af7d7f183d1690302cc73ef1f) answers with the same
// frames but accepts any request. A change upstream touches this file only.
//
// The protocol:
//
//   - The engine binds a ROUTER socket (its snapshot_endpoint; llm-d's
//     podDiscoveryConfig.snapshotSocketPort). A client sends one request as
//     a REQ socket would: an empty delimiter frame, then the 8 bytes
//     "snapshot". kvroute uses a DEALER and writes the delimiter itself.
//     The recorder ignores any other request (no reply at all).
//   - The reply, after the delimiter, is one multipart message: frame 0 the
//     sequence the snapshot is consistent with (8 bytes, big-endian,
//     signed), frame 1 the publisher identity (16 bytes, a UUID drawn when
//     the publisher starts; live batches of the same publisher carry it as
//     their publisher_id), then zero or more chunk frames.
//   - Sequence -2 means "unavailable, retry later" (the recorder stopped or
//     is not ready) and carries no chunks; -1 means nothing was published
//     yet (the snapshot is empty, carries no chunks, and the live stream's
//     sequence 0 follows). A snapshot at sequence S covers every batch up
//     to and including S; live batches from S+1 on follow it.
//   - Each chunk is one msgpack KVEventBatch, encoded exactly like a live
//     batch's payload (the array [ts, events, data_parallel_rank], at most
//     256 events each). Applied in order to an empty index, the chunks
//     rebuild the engine's resident blocks: stores with tokens (parents
//     first), removals of blocks taught only as parents, then token-less
//     stores and removals that set each block's residency count.
//
// kvroute's extension for an engine serving several models (its
// simulated engine with extra models): one publisher sends each model's
// batches on its own topic kv@<ip:port>@<model>, and vLLM's chunks carry no
// model. Such an engine's reply therefore interleaves topic frames with the
// chunks: a frame starting with "kv@" (TopicFramePrefix; a chunk is a
// msgpack array and never starts with 'k') names the topic of the chunks
// that follow it, up to the next topic frame; chunks before the first one
// are the publisher's configured topic's, as in vLLM's reply. A vLLM engine
// never sends one, so its replies parse exactly as before; a client that
// does not know the extension fails to decode the topic frame as a batch
// and falls back to its replay, never indexing a block under the wrong
// model.

package snapshot

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Request is the request frame vLLM's recorder expects after the delimiter.
const Request = "snapshot"

// Sequences with a meaning of their own in a reply's frame 0.
const (
	// SeqUnavailable: the engine cannot serve a snapshot now; retry later.
	SeqUnavailable int64 = -2
	// SeqEmpty: the publisher has published nothing yet; the snapshot is
	// empty and the live stream starts at sequence 0.
	SeqEmpty int64 = -1
)

// PublisherIDSize is the length of the publisher identity frame.
const PublisherIDSize = 16

// Protocol error reasons: the fixed values of ProtocolError.Reason (and of
// the metric label kvroute counts rejected replies under).
const (
	ReasonNoDelimiter  = "no_delimiter"   // the reply does not start with an empty frame
	ReasonShort        = "short"          // fewer than the sequence and identity frames
	ReasonSeqSize      = "seq_size"       // the sequence frame is not 8 bytes
	ReasonIDSize       = "publisher_size" // the identity frame is not 16 bytes
	ReasonBadSeq       = "bad_seq"        // a sequence below -2
	ReasonChunksNoData = "unavailable_with_chunks"
	// ReasonEmptyWithChunks: chunks with the empty sequence, which says
	// nothing was published (so no block is cached).
	ReasonEmptyWithChunks = "empty_with_chunks"
	ReasonEmptyChunk      = "empty_chunk" // a chunk frame with no bytes (never a msgpack batch)
)

// ErrProtocol is wrapped by every reply kvroute does not understand.
var ErrProtocol = errors.New("snapshot: reply not understood")

// ProtocolError is a reply that breaks the protocol; Reason is one of the
// Reason constants.
type ProtocolError struct {
	Reason string
	Detail string
}

// Error describes the violation.
func (e *ProtocolError) Error() string {
	return fmt.Sprintf("snapshot: reply not understood (%s): %s", e.Reason, e.Detail)
}

// Unwrap makes errors.Is(err, ErrProtocol) hold.
func (e *ProtocolError) Unwrap() error { return ErrProtocol }

// Reply is a decoded snapshot reply.
type Reply struct {
	// Seq is the sequence the snapshot is consistent with (SeqEmpty: none
	// yet); SeqUnavailable when Unavailable.
	Seq int64
	// PublisherID identifies the publisher lifetime the snapshot belongs to.
	PublisherID [PublisherIDSize]byte
	// Unavailable: the engine answered "retry later".
	Unavailable bool
	// Chunks are the msgpack KVEventBatch payloads, in order. A consumer
	// may nil each one once applied, so its memory can be reclaimed.
	Chunks [][]byte
	// Bytes is the total size of the chunks.
	Bytes int64
	// ChunkTopics, with kvroute's several-models extension, is the topic
	// frame each chunk follows (nil for the chunks before the first one):
	// parallel to Chunks, nil when the reply has no topic frame.
	ChunkTopics [][]byte
}

// TopicFramePrefix starts a topic frame of kvroute's several-models
// extension (see the package's protocol description).
const TopicFramePrefix = "kv@"

// RequestFrames are the frames a DEALER sends to ask for a snapshot: the
// delimiter a REQ socket would add, then the request.
func RequestFrames() [][]byte { return [][]byte{{}, []byte(Request)} }

// IsRequest reports whether frames (as a ROUTER connection reads them from
// one peer, identity stripped) are a snapshot request.
func IsRequest(frames [][]byte) bool {
	return len(frames) == 2 && len(frames[0]) == 0 && string(frames[1]) == Request
}

// ParseReply decodes the frames a DEALER received (delimiter first). The
// chunks alias frames. Anything it does not understand is a *ProtocolError.
func ParseReply(frames [][]byte) (Reply, error) {
	bad := func(reason, format string, a ...any) (Reply, error) {
		return Reply{}, &ProtocolError{Reason: reason, Detail: fmt.Sprintf(format, a...)}
	}
	if len(frames) == 0 || len(frames[0]) != 0 {
		return bad(ReasonNoDelimiter, "%d frames, the first is not an empty delimiter", len(frames))
	}
	frames = frames[1:]
	if len(frames) < 2 {
		return bad(ReasonShort, "%d frames after the delimiter, want at least 2", len(frames))
	}
	if len(frames[0]) != 8 {
		return bad(ReasonSeqSize, "sequence frame of %d bytes, want 8", len(frames[0]))
	}
	if len(frames[1]) != PublisherIDSize {
		return bad(ReasonIDSize, "publisher identity of %d bytes, want %d", len(frames[1]), PublisherIDSize)
	}
	r := Reply{Seq: int64(binary.BigEndian.Uint64(frames[0]))}
	copy(r.PublisherID[:], frames[1])
	switch {
	case r.Seq < SeqUnavailable:
		return bad(ReasonBadSeq, "sequence %d", r.Seq)
	case r.Seq == SeqUnavailable && len(frames) > 2:
		return bad(ReasonChunksNoData, "%d chunks with the unavailable sequence", len(frames)-2)
	case r.Seq == SeqUnavailable:
		r.Unavailable = true
		return r, nil
	}
	r.Chunks = frames[2:]
	var topic []byte
	n := 0 // chunks kept, topic frames taken out
	for i, c := range r.Chunks {
		switch {
		case len(c) == 0:
			return bad(ReasonEmptyChunk, "chunk %d is empty", i)
		case isTopicFrame(c):
			if r.ChunkTopics == nil {
				r.ChunkTopics = make([][]byte, n, len(r.Chunks))
			}
			topic = c
			continue
		}
		r.Chunks[n] = c
		if r.ChunkTopics != nil {
			r.ChunkTopics = append(r.ChunkTopics, topic)
		}
		n++
		r.Bytes += int64(len(c))
	}
	r.Chunks = r.Chunks[:n]
	if r.Seq == SeqEmpty && n > 0 {
		return bad(ReasonEmptyWithChunks, "%d chunks with the empty sequence", n)
	}
	return r, nil
}

// isTopicFrame reports whether a chunk frame is a topic frame of the
// several-models extension.
func isTopicFrame(c []byte) bool {
	return len(c) >= len(TopicFramePrefix) && string(c[:len(TopicFramePrefix)]) == TopicFramePrefix
}

// ReplyFrames encodes a reply as a ROUTER sends it to one DEALER or REQ
// peer (delimiter first): seq, the publisher identity, then the chunks.
// Use SeqUnavailable (and no chunks) for "retry later".
func ReplyFrames(seq int64, id [PublisherIDSize]byte, chunks [][]byte) [][]byte {
	out := make([][]byte, 0, 3+len(chunks))
	out = append(out, []byte{}, binary.BigEndian.AppendUint64(nil, uint64(seq)), id[:])
	return append(out, chunks...)
}
