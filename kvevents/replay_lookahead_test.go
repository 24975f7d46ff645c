package kvevents

import (
	"context"
	"encoding/binary"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/zmqx"
)

// startGatedRouter is a replay socket answering every request with batches
// start..end-1 (pool payloads, current layout) and END, pausing after the
// first `first` of them until gate is closed (before END when those are all
// of them).
func startGatedRouter(t *testing.T, end, first uint64, gate <-chan struct{}) (addr string, stop func()) {
	l, err := zmqx.Listen(context.Background(), "127.0.0.1:0", zmq4.Router, zmqx.Options{}, nil)
	require.NoError(t, err)
	done := make(chan struct{})
	quit := make(chan struct{})
	var wg sync.WaitGroup
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(2)
			go func() {
				defer wg.Done()
				<-quit
				_ = c.Close()
			}()
			go func() {
				defer wg.Done()
				for {
					m, err := c.ReadMsg()
					if err != nil {
						return
					}
					if m.Command || len(m.Frames) != 2 {
						continue
					}
					start := binary.BigEndian.Uint64(m.Frames[1])
					topic := []byte("kv@" + seqID + "@" + poolModel)
					for s := start; s < end; s++ {
						if s == start+first {
							select {
							case <-gate:
							case <-quit:
								return
							}
						}
						if c.WriteMsg([]byte{}, topic, binary.BigEndian.AppendUint64(nil, s), poolPayload(s)) != nil {
							return
						}
					}
					if start+first >= end {
						select {
						case <-gate:
						case <-quit:
							return
						}
					}
					_ = c.WriteMsg([]byte{}, []byte{}, binary.BigEndian.AppendUint64(nil, 1<<64-1), []byte{})
				}
			}()
		}
	}()
	return l.Endpoint(), func() {
		close(quit)
		_ = l.Close()
		<-done
		wg.Wait()
	}
}

// A replay socket that streams contiguous sequences quickly, far beyond the
// live stream: its buffer reaches 10,003 while the live stream is at 749.
// The connect replay may run at most ReplayLookahead (1,000) past what the
// live stream has shown, whatever its pace; beyond that it ends as a counted
// protocol error, and the endpoint, whose watermark it had moved past the
// live stream, is rebuilt from the live stream: all 50 later live messages
// are applied. Before, the watermark went to 10,003 and every later live
// message was dropped as already_applied.
func TestStreamFastReplayAheadOfLiveStreamEnds(t *testing.T) {
	defer leakcheck.Check(t)()
	gate := make(chan struct{})
	addr, stop := startGatedRouter(t, 10004, 1000, gate)
	defer stop()
	f := newSeqFixture(t, PoolConfig{TailProbeDelay: -1}, 0, addr)
	defer f.close()
	f.st.onConnect(false) // subscribed: the connect replay starts, 0..999 arrive
	require.Eventually(t, func() bool { return f.status().Applied == 999 }, poolWait, poolTick, f.logs.String())
	for s := range uint64(750) { // the live stream shows 0..749, all covered by the replay
		f.st.receive(s, poolPayload(s), poolModel)
	}
	require.Eventually(t, func() bool { return f.count("dropped", string(dropAlreadyApplied)) == 750 },
		poolWait, poolTick, f.logs.String())
	close(gate) // the replay streams on, towards 10,003
	require.Eventually(t, func() bool { return f.count("errors", opReplayProtocol) == 1 }, poolWait, poolTick, f.logs.String())
	st := f.status()
	require.False(t, st.Replaying)
	require.False(t, st.HasApplied && st.Applied > 749, "the watermark is not left past the live stream: %+v", st)
	require.Contains(t, f.logs.String(), "last_seen=749 lookahead=1000")
	for s := uint64(750); s < 800; s++ { // the live stream goes on
		f.st.receive(s, poolPayload(s), poolModel)
	}
	f.wait(799)
	requireHeld(t, f.ix, seqID, 750, 799)
	require.Equal(t, 750.0, f.count("dropped", string(dropAlreadyApplied)), "none of the 50 later live messages skipped")
}

// ReplayLookahead is added to sequences with saturation: a lookahead of
// 2^64-1 (no bound) must not wrap. A connect replay before any live
// message applies 0..9 of an idle engine's buffer; the live messages 5..10
// that were in flight meanwhile are covered or continue it. Before, the
// first live message's check (seq + lookahead < watermark) wrapped to
// seq-1 < 9, counted a protocol error and cleared the endpoint, losing
// batches 0..4.
func TestStreamReplayLookaheadDoesNotWrap(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{TailProbeDelay: -1, ReplayLookahead: 1<<64 - 1}, 100, "")
	defer f.close()
	for s := range uint64(10) {
		f.hide(s, s)
	}
	f.st.onConnect(false)
	require.Eventually(t, func() bool { st := f.status(); return st.HasApplied && st.Applied == 9 && !st.Replaying },
		poolWait, poolTick, f.logs.String())
	for s := uint64(5); s <= 10; s++ {
		f.publish(s, s)
	}
	f.wait(10)
	requireHeld(t, f.ix, seqID, 0, 10)
	require.Zero(t, f.count("errors", opReplayProtocol), f.logs.String())
	require.Equal(t, 5.0, f.count("dropped", string(dropAlreadyApplied)))
}

// The watchdog's allowance saturates: a live sequence far ahead of the
// watermark (a span of 2^62 batches) or a ReplayGrace near the largest
// duration must not overflow to a negative allowance, which cut the replay
// short at the watchdog's first tick. Before, the allowance went through a
// float whose conversion (or the sum with the grace) wrapped.
func TestReplayAllowanceSaturates(t *testing.T) {
	const maxD = time.Duration(math.MaxInt64)
	require.Equal(t, 2*time.Second+10*time.Second, replayAllowance(2*time.Second, 1000, 100))
	require.Equal(t, 2*time.Second+1500*time.Millisecond, replayAllowance(2*time.Second, 3, 2))
	require.Equal(t, time.Second, replayAllowance(time.Second, 0, 100), "an empty range: the grace alone")
	require.Equal(t, maxD, replayAllowance(2*time.Second, 1<<62, 100))
	require.Equal(t, maxD, replayAllowance(2*time.Second, math.MaxUint64, 1))
	require.Equal(t, maxD, replayAllowance(maxD-time.Second, 1000, 100))
	require.Equal(t, maxD, replayAllowance(maxD, 1, 1<<62))
	require.Equal(t, maxD-time.Second, replayAllowance(maxD-time.Second, 0, 100))
}
