package snapshot

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

func seqFrame(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

func TestParseReplyRejectsWhatItDoesNotUnderstand(t *testing.T) {
	id := make([]byte, 16)
	for _, tc := range []struct {
		name   string
		frames [][]byte
		reason string
	}{
		{"no frames", nil, ReasonNoDelimiter},
		{"no delimiter", [][]byte{seqFrame(1), id}, ReasonNoDelimiter},
		{"short", [][]byte{{}, seqFrame(1)}, ReasonShort},
		{"seq size", [][]byte{{}, {1, 2, 3}, id}, ReasonSeqSize},
		{"identity size", [][]byte{{}, seqFrame(1), id[:8]}, ReasonIDSize},
		{"bad seq", [][]byte{{}, seqFrame(-3), id}, ReasonBadSeq},
		{"unavailable with chunks", [][]byte{{}, seqFrame(SeqUnavailable), id, {0x90}}, ReasonChunksNoData},
		{"empty chunk", [][]byte{{}, seqFrame(3), id, {}}, ReasonEmptyChunk},
		// "Nothing published yet" with blocks: applied, they would be
		// entries without a watermark, under a position of sequence 0.
		{"empty with chunks", [][]byte{{}, seqFrame(SeqEmpty), id, {0x90}}, ReasonEmptyWithChunks},
		{"empty with a topic's chunks", [][]byte{{}, seqFrame(SeqEmpty), id, []byte("kv@10.0.0.1:8000@beta"), {0x90}}, ReasonEmptyWithChunks},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseReply(tc.frames)
			var pe *ProtocolError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, tc.reason, pe.Reason)
			require.ErrorIs(t, err, ErrProtocol)
		})
	}
}

func TestReplyFramesRoundTrip(t *testing.T) {
	r, err := ParseReply(ReplyFrames(SeqUnavailable, testID, nil))
	require.NoError(t, err)
	require.True(t, r.Unavailable)
	require.Equal(t, testID, r.PublisherID)
	r, err = ParseReply(ReplyFrames(SeqEmpty, testID, nil))
	require.NoError(t, err)
	require.False(t, r.Unavailable)
	require.Equal(t, SeqEmpty, r.Seq)
	require.True(t, IsRequest(RequestFrames()))
	require.False(t, IsRequest([][]byte{{}, []byte("snapshots")}))
}

// kvroute's several-models extension: a topic frame names the topic of the
// chunks after it; a vLLM reply (no topic frame) parses as before.
func TestParseReplyTopicFrames(t *testing.T) {
	a, b, c := []byte{0x93, 1}, []byte{0x93, 2}, []byte{0x93, 3}
	beta, gamma := []byte("kv@10.0.0.1:8000@beta"), []byte("kv@10.0.0.1:8000@gamma")
	r, err := ParseReply(ReplyFrames(7, testID, [][]byte{a, beta, b, gamma, c}))
	require.NoError(t, err)
	require.Equal(t, [][]byte{a, b, c}, r.Chunks)
	require.Equal(t, [][]byte{nil, beta, gamma}, r.ChunkTopics)
	require.EqualValues(t, 6, r.Bytes, "topic frames are not chunk bytes")

	r, err = ParseReply(ReplyFrames(7, testID, [][]byte{beta}))
	require.NoError(t, err)
	require.Empty(t, r.Chunks, "a topic frame without chunks")

	r, err = ParseReply(ReplyFrames(7, testID, [][]byte{a, b}))
	require.NoError(t, err)
	require.Equal(t, [][]byte{a, b}, r.Chunks)
	require.Nil(t, r.ChunkTopics, "vLLM's reply")
}
