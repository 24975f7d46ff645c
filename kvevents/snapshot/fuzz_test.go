package snapshot

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/kvroute/kvroute/kvevents/wire"
)

// splitFrames turns fuzz input into frames: each frame is a 2-byte
// big-endian length then its bytes (a short tail is one last frame).
func splitFrames(data []byte) [][]byte {
	var frames [][]byte
	for len(data) >= 2 {
		n := int(binary.BigEndian.Uint16(data))
		data = data[2:]
		n = min(n, len(data))
		frames = append(frames, data[:n])
		data = data[n:]
	}
	if len(data) > 0 {
		frames = append(frames, data)
	}
	return frames
}

// FuzzParseReply feeds arbitrary replies to the reply decoder and every
// chunk of an accepted one to the batch decoder the stream uses: neither
// may panic, and an accepted reply holds the protocol's invariants.
func FuzzParseReply(f *testing.F) {
	join := func(frames ...[]byte) []byte {
		var out []byte
		for _, fr := range frames {
			out = binary.BigEndian.AppendUint16(out, uint16(len(fr)))
			out = append(out, fr...)
		}
		return out
	}
	var b wire.Batch
	b.TS, b.HasDPRank = 1.5, true
	b.Events = []wire.Event{{Type: wire.EventBlockStored, BlockHashes: []uint64{1, 2}, TokenIDs: []uint32{1, 2, 3, 4},
		BlockSize: 2, Medium: "GPU", HasGroup: true}}
	chunk := wire.AppendBatch(nil, &b, wire.FormatVLLM)
	f.Add(join(ReplyFrames(3, testID, [][]byte{chunk})...))
	f.Add(join(ReplyFrames(SeqUnavailable, testID, nil)...))
	f.Add(join(ReplyFrames(SeqEmpty, testID, nil)...))
	f.Add(join([]byte{}, []byte{1, 2}))
	f.Add(join(ReplyFrames(5, testID, [][]byte{chunk, []byte("kv@10.0.0.1:8000@beta"), chunk, chunk})...)) // several models
	dec := wire.NewDecoder(wire.Limits{})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseReply(splitFrames(data))
		if err != nil {
			return
		}
		if r.Seq < SeqUnavailable || ((r.Unavailable || r.Seq == SeqEmpty) && len(r.Chunks) > 0) {
			t.Fatalf("accepted an invalid reply: %+v", r)
		}
		var sum int64
		for _, c := range r.Chunks {
			if len(c) == 0 {
				t.Fatal("accepted an empty chunk")
			}
			sum += int64(len(c))
			var out wire.Batch
			_ = dec.Decode(c, &out)
		}
		if r.ChunkTopics != nil && len(r.ChunkTopics) != len(r.Chunks) {
			t.Fatalf("%d chunk topics for %d chunks", len(r.ChunkTopics), len(r.Chunks))
		}
		for _, c := range r.Chunks {
			if isTopicFrame(c) {
				t.Fatal("a topic frame kept as a chunk")
			}
		}
		if sum != r.Bytes {
			t.Fatalf("Bytes %d, chunks hold %d", r.Bytes, sum)
		}
		// Written again as a replica's server writes it (ReplyFrames, a
		// topic frame before each chunk whose topic differs from the one
		// before), an accepted reply reads back as itself.
		again, err := ParseReply(ReplyFrames(r.Seq, r.PublisherID, reencodeChunks(r)))
		if err != nil {
			t.Fatalf("a re-encoded reply is refused: %v", err)
		}
		if again.Seq != r.Seq || again.PublisherID != r.PublisherID || again.Unavailable != r.Unavailable ||
			again.Bytes != r.Bytes || !slices.EqualFunc(again.Chunks, r.Chunks, bytes.Equal) ||
			!slices.EqualFunc(topicsOf(again), topicsOf(r), bytes.Equal) {
			t.Fatalf("re-encoded reply %+v reads back as %+v", r, again)
		}
	})
}

// reencodeChunks returns r's chunks with a topic frame before each chunk
// whose topic differs from the chunk's before it, copied (ParseReply
// aliases and rearranges the frames it is given).
func reencodeChunks(r Reply) [][]byte {
	var out [][]byte
	var last []byte
	for i, c := range r.Chunks {
		if r.ChunkTopics != nil && r.ChunkTopics[i] != nil && (last == nil || !bytes.Equal(last, r.ChunkTopics[i])) {
			last = r.ChunkTopics[i]
			out = append(out, bytes.Clone(last))
		}
		out = append(out, bytes.Clone(c))
	}
	return out
}

// topicsOf is r.ChunkTopics, nil when no chunk follows a topic frame (a
// reply whose topic frames all come last names no chunk's topic).
func topicsOf(r Reply) [][]byte {
	for _, t := range r.ChunkTopics {
		if t != nil {
			return r.ChunkTopics
		}
	}
	return nil
}
