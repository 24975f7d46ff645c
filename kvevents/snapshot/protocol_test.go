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
