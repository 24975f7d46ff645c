package kvevents

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/zmqpub"
	"github.com/kvroute/kvroute/telemetry"
)

// One Position and one check: the position the pool reports
// (Pool.Position) is the one its applier records in the index, which is
// what a snapshot persists; and a stream given that position through
// EnsureFrom is verified and counted exactly like one that adopts it from a
// restored index.
func TestPoolPositionIsTheIndexRecordedOne(t *testing.T) {
	defer leakcheck.Check(t)()
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: resumeID, Model: poolModel, ReplayAddr: "127.0.0.1:0", BufferSize: 1000})
	defer pub.Close()
	publishResume(t, pub, 0, 9)
	first := newPoolIndex(t)
	p1, _, _ := runPool(t, PoolConfig{}, first, pub, 9)
	pos, ok := p1.Position(resumeID)
	require.True(t, ok)
	raw, ok := first.Position(resumeID)
	require.True(t, ok, "the applier recorded the position in the index")
	recorded, err := decodePosition(raw)
	require.NoError(t, err)
	require.Equal(t, pos, recorded)
	require.Equal(t, positionOf(9, resumeBatch(9)), pos)
	require.NoError(t, p1.Close())
	data := snap(t, first)

	publishResume(t, pub, 10, 14)
	ix := loaded(t, data)
	logs := &logBuffer{}
	reg := prometheus.NewRegistry()
	p2, err := NewPool(PoolConfig{}, ix, Options{Set: telemetry.Set{Registerer: reg, Logger: logs.logger()}})
	require.NoError(t, err)
	defer p2.Close()
	require.NoError(t, p2.EnsureFrom(Endpoint{ID: resumeID, Model: poolModel, EventsAddress: pub.Endpoint(), ReplayAddress: pub.ReplayEndpoint()}, pos))
	waitApplied(t, p2, resumeID, 14)
	require.Equal(t, 1.0, resumes(t, reg, ResumeOK), "EnsureFrom goes through the resume check: %s", logs)
	st, _ := p2.Status(resumeID)
	require.Equal(t, uint64(5), st.Messages, "only the batches after the position: %s", logs)
	requireHeld(t, ix, resumeID, 0, 14)
}

// The buffer's oldest batch is the one right after the position: nothing
// was lost, so the loaded entries stay and the stream continues (counted
// unverified); the reconnect check alone would have cleared the endpoint,
// since it cannot compare the digest.
func TestPoolResumeBufferStartsRightAfterPosition(t *testing.T) {
	defer leakcheck.Check(t)()
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: resumeID, Model: poolModel, ReplayAddr: "127.0.0.1:0", BufferSize: 5})
	defer pub.Close()
	first := newPoolIndex(t)
	publishResume(t, pub, 0, 0)
	p1, _, _ := runPool(t, PoolConfig{}, first, pub, 0)
	for n := uint64(1); n <= 4; n++ {
		publishResume(t, pub, n, n)
		waitApplied(t, p1, resumeID, n)
	}
	require.NoError(t, p1.Close())
	data := snap(t, first)

	publishResume(t, pub, 5, 9) // the 5-batch buffer now holds 5..9
	ix := loaded(t, data)
	p, logs, reg := runPool(t, PoolConfig{TailProbeDelay: -1}, ix, pub, 9)
	defer p.Close()
	require.Equal(t, 1.0, resumes(t, reg, ResumeUnverified), "%s", logs)
	require.Zero(t, resumes(t, reg, ResumeWithGap), "%s", logs)
	requireHeld(t, ix, resumeID, 0, 9)
	st, _ := p.Status(resumeID)
	require.Equal(t, uint64(5), st.Messages, "%s", logs)
}

// The encoded position is read back from snapshots (a file or a peer):
// anything that is not an encoding is rejected, and what decodes encodes
// back to the same bytes.
func FuzzParsePosition(f *testing.F) {
	f.Add(positionOf(42, []byte("payload")).appendBinary(nil))
	f.Add(appendPosition(nil, positionOf(7, []byte("x")), map[int]string{0: "full_attention", 3: "sliding_window"}))
	f.Add([]byte{positionVersion})
	f.Add([]byte{2, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		pos, groups, err := parsePosition(b)
		if err != nil {
			require.Zero(t, pos)
			return
		}
		require.LessOrEqual(t, len(groups), maxPositionGroups)
		again, groups2, err := parsePosition(appendPosition(nil, pos, groups))
		require.NoError(t, err)
		require.Equal(t, pos, again)
		require.Equal(t, len(groups), len(groups2))
	})
}
