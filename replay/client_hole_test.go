package replay

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/zmqx"
)

// A reply that skips sequences (vLLM's ROUTER dropped replies past its send
// high-water mark) is asked again from the first missing sequence, after
// Backoff, and the replay ends exact. Before, the first skipped sequence
// failed the replay (ErrNonContiguous) with the rest never asked for.
func TestReplayHoleAskedAgainFromFirstMissing(t *testing.T) {
	defer leakcheck.Check(t)()
	r := startFakeRouter(t, func(c *zmqx.Conn, start uint64, req int) {
		for s := start; s < 20; s++ {
			if req == 0 && s >= 7 && s < 11 {
				continue // dropped by the send queue
			}
			_ = sendBatch(c, s)
		}
		_ = sendEnd(c)
	})
	defer r.Close()
	var col collector
	start := time.Now()
	res, err := newClient(t, ClientConfig{}).Replay(context.Background(), r.Endpoint(), 2, col.apply)
	require.NoError(t, err)
	require.Equal(t, seqRange(2, 20), col.seqs, "every batch once, in order")
	require.Equal(t, []uint64{2, 7}, r.Starts(), "asked again from the first missing sequence")
	require.Equal(t, 1, res.Holes)
	require.Equal(t, 2, res.Attempts)
	require.Equal(t, uint64(19), res.Highest)
	require.True(t, res.Covered)
	require.GreaterOrEqual(t, time.Since(start), DefaultBackoff, "not asked again back to back")
}

// A publisher whose every reply has a hole: the replay asks again at most
// MaxHoleRetries times, then fails with OpHole, having delivered the
// contiguous run it got and reporting how far the publisher had published.
func TestReplayHolesBounded(t *testing.T) {
	defer leakcheck.Check(t)()
	r := startFakeRouter(t, func(c *zmqx.Conn, start uint64, _ int) {
		_ = sendBatch(c, start)
		_ = sendBatch(c, start+2)
		_ = sendEnd(c)
	})
	defer r.Close()
	var col collector
	var ops []string
	res, err := newClient(t, ClientConfig{MaxHoleRetries: 3, Backoff: time.Millisecond,
		OnAttemptError: func(e *Error) { ops = append(ops, e.Op) }}).
		Replay(context.Background(), r.Endpoint(), 5, col.apply)
	var re *Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, OpHole, re.Op)
	require.ErrorIs(t, err, ErrHole)
	require.Equal(t, 4, res.Holes)
	require.Equal(t, 4, res.Attempts)
	require.Equal(t, seqRange(5, 9), col.seqs)
	require.Equal(t, uint64(10), res.Highest)
	require.Equal(t, []string{OpHole, OpHole, OpHole, OpHole}, ops, "every hole is reported")
}

// The first batch of a re-request may be later than asked when the buffer
// moved on between attempts: apply sees the jump, as for the first request.
func TestReplayReRequestAfterBufferMovedOn(t *testing.T) {
	defer leakcheck.Check(t)()
	r := startFakeRouter(t, func(c *zmqx.Conn, start uint64, req int) {
		if req == 0 {
			_ = sendBatch(c, start)
			_ = sendBatch(c, start+3) // a hole
			return
		}
		for s := start + 5; s < start+8; s++ { // evicted meanwhile
			_ = sendBatch(c, s)
		}
		_ = sendEnd(c)
	})
	defer r.Close()
	var col collector
	res, err := newClient(t, ClientConfig{}).Replay(context.Background(), r.Endpoint(), 0, col.apply)
	require.NoError(t, err)
	require.Equal(t, []uint64{0, 6, 7, 8}, col.seqs)
	require.Equal(t, 1, res.Holes)
}

// A Server with a small send high-water mark drops replies like vLLM's
// ROUTER; the client still ends with every batch, exactly once and in order.
// Whether a replay meets a full queue depends on how the server's goroutines
// are scheduled (a drain that keeps up drops nothing), so replays are
// repeated, each checked, until one has met it.
func TestReplayExactFromServerDroppingPastHWM(t *testing.T) {
	defer leakcheck.Check(t)()
	const n = 2000
	srv, err := NewServer(ServerConfig{Addr: "127.0.0.1:0", SendHWM: 100}, filledBuffer(n, 0, n), Options{})
	require.NoError(t, err)
	defer srv.Close()
	client := newClient(t, ClientConfig{Backoff: time.Millisecond, IdleTimeout: 300 * time.Millisecond, MaxHoleRetries: 1000})
	for replays := 1; ; replays++ {
		before := srv.Stats().Dropped
		var col collector
		res, err := client.Replay(context.Background(), srv.Endpoint(), 0, col.apply)
		require.NoError(t, err)
		require.Equal(t, seqRange(0, n), col.seqs)
		for s := range uint64(n) {
			require.Equal(t, string(payloadFor(s)), col.data[s])
		}
		dropped := srv.Stats().Dropped - before
		if dropped == 0 {
			require.Less(t, replays, 20, "the server never dropped a reply past its HWM")
			continue
		}
		// Replies were dropped: the client had to ask again, for a hole or
		// after its idle timeout when the tail was lost.
		require.Greater(t, res.Attempts, 1)
		t.Logf("replay %d: %d batches through a send HWM of 100: %d holes, %d attempts, %d replies dropped",
			replays, n, res.Holes, res.Attempts, dropped)
		return
	}
}
