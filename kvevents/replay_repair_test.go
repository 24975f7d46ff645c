package kvevents

import (
	"context"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/zmqx"
	"github.com/kvroute/kvroute/replay"
)

// startScriptedRouter is a replay socket that answers request n (from 1)
// for start with the pool payloads of the sequences answer returns, in the
// current layout, followed by END when end is set. answer may block; it
// gets a channel closed when the router stops.
func startScriptedRouter(t *testing.T, answer func(n int, start uint64, quit <-chan struct{}) (seqs []uint64, end bool)) (addr string, stop func()) {
	l, err := zmqx.Listen(context.Background(), "127.0.0.1:0", zmq4.Router, zmqx.Options{}, nil)
	require.NoError(t, err)
	done := make(chan struct{})
	quit := make(chan struct{})
	var wg sync.WaitGroup
	var requests atomic.Int64
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
					seqs, end := answer(int(requests.Add(1)), start, quit)
					topic := []byte("kv@" + seqID + "@" + poolModel)
					for _, s := range seqs {
						if c.WriteMsg([]byte{}, topic, binary.BigEndian.AppendUint64(nil, s), poolPayload(s)) != nil {
							return
						}
					}
					if end {
						_ = c.WriteMsg([]byte{}, []byte{}, binary.BigEndian.AppendUint64(nil, 1<<64-1), []byte{})
					}
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

// A repair replay is bounded by the live stream like every replay: the end
// of the hole it repairs is the highest sequence an earlier, failed replay
// carried, which the publisher's replay socket, not the live stream, told.
// Here the reconnect check of an idle engine fails at a hole whose reply
// carries the sequence 2^62; live traffic then resumes at 4, and the repair
// that follows is answered with 2^62 alone. It is a protocol error that
// ends the repair, and the live stream goes on being applied. Before, the
// repair's bound was 2^62 + ReplayLookahead: the endpoint was cleared and
// rebuilt at 2^62, and every later live message was dropped as already
// applied.
func TestStreamRepairBoundedByLiveStream(t *testing.T) {
	defer leakcheck.Check(t)()
	const bogus = uint64(1) << 62
	gate := make(chan struct{})
	var repairAsked atomic.Bool
	addr, stop := startScriptedRouter(t, func(n int, start uint64, quit <-chan struct{}) ([]uint64, bool) {
		switch {
		case n == 1: // the connect replay: 0..2
			return []uint64{0, 1, 2}, true
		case n <= 3: // the reconnect check, and its retry: a batch, then a hole
			return []uint64{start, bogus}, false
		}
		repairAsked.Store(true) // the repair: once the live stream resumed
		select {
		case <-gate:
		case <-quit:
			return nil, false
		}
		return []uint64{bogus}, true
	})
	defer stop()
	f := newSeqFixture(t, PoolConfig{TailProbeDelay: -1, ReplayCooldown: 50 * time.Millisecond,
		ReplayClient: replay.ClientConfig{MaxHoleRetries: 1, Backoff: time.Millisecond}}, 0, addr)
	defer f.close()
	for s := range uint64(3) {
		f.st.receive(s, poolPayload(s), poolModel)
	}
	f.wait(2)

	f.st.onConnect(false) // the reconnect check: 2 (digest matches), 3, then the hole at 2^62
	require.Eventually(t, func() bool { return f.count("replays", replayFailed) == 1 }, poolWait, poolTick, f.logs.String())
	require.True(t, f.status().Degraded, "the hole is open")
	skipped := f.count("dropped", string(dropAlreadyApplied)) // live 0..2, which the connect replay covered
	// Live again (applied, or held if the repair already waits for its
	// answer): the repair's answer arrives with the live stream at 4.
	f.st.receive(4, poolPayload(4), poolModel)
	require.Eventually(t, repairAsked.Load, poolWait, poolTick, f.logs.String())
	close(gate)
	require.Eventually(t, func() bool { return f.count("errors", opReplayProtocol) >= 1 }, poolWait, poolTick, f.logs.String())
	for s := uint64(5); s <= 7; s++ {
		f.st.receive(s, poolPayload(s), poolModel)
	}
	f.wait(7)
	st := f.status()
	require.Equal(t, uint64(7), st.Applied, f.logs.String())
	require.False(t, st.Degraded, "a hole that ended beyond the bound is forgotten: %+v", st)
	requireHeld(t, f.ix, seqID, 0, 7)
	require.Equal(t, skipped, f.count("dropped", string(dropAlreadyApplied)), "no live message skipped")
}

// The hole a failed replay leaves ends at the highest sequence its replies
// carried only within the same bound: a reply beyond ReplayLookahead of the
// live stream tells of no published sequence. Here the tail probe after
// live 0..2 is answered with 2 and 3, each followed by a reply at 2^62,
// until the replay gives up: 3 was the lost tail, nothing after it is
// known to be missing, and the endpoint is not degraded. Before, the hole
// was recorded up to 2^62: the endpoint stayed degraded, and the repair
// that followed, finding nothing after 3, cleared it.
func TestStreamHoleBeyondLookaheadNotRecorded(t *testing.T) {
	defer leakcheck.Check(t)()
	const bogus = uint64(1) << 62
	addr, stop := startScriptedRouter(t, func(n int, start uint64, _ <-chan struct{}) ([]uint64, bool) {
		if n == 1 { // the connect replay: 0..2
			return []uint64{0, 1, 2}, true
		}
		return []uint64{start, bogus}, false // a batch, then a hole
	})
	defer stop()
	f := newSeqFixture(t, PoolConfig{TailProbeDelay: 20 * time.Millisecond, ReplayCooldown: time.Hour,
		ReplayClient: replay.ClientConfig{MaxHoleRetries: 1, Backoff: time.Millisecond}}, 0, addr)
	defer f.close()
	for s := range uint64(3) {
		f.st.receive(s, poolPayload(s), poolModel)
	}
	// The stream goes quiet: the tail probe from 2 gives up at its second hole.
	require.Eventually(t, func() bool { return f.count("replays", replayFailed) == 1 && !f.status().Replaying },
		poolWait, poolTick, f.logs.String())
	st := f.status()
	require.Equal(t, uint64(3), st.Applied, f.logs.String())
	require.False(t, st.Degraded, "no sequence after 3 is known to be missing: %+v\n%s", st, f.logs.String())
	requireHeld(t, f.ix, seqID, 0, 3)
}
