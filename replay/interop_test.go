package replay

import (
	"context"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/pytest"
	"github.com/stretchr/testify/require"
)

// Interop: the Go client against a libzmq ROUTER that behaves like vLLM's
// replay service (testdata/vllm_publisher.py). Skipped without python3-zmq
// unless KVROUTE_REQUIRE_INTEROP=1.

func TestInteropReplayBothLayouts(t *testing.T) {
	pytest.Require(t)
	defer leakcheck.Check(t)()
	for _, layout := range []Layout{LayoutCurrent, LayoutLegacy} {
		t.Run(string(layout), func(t *testing.T) {
			p := pytest.Start(t, pytest.Config{Replay: true, Layout: string(layout)})
			defer p.Stop()
			_, _, err := p.Hide(6) // buffered for replay, never seen live
			require.NoError(t, err)
			_, _, err = p.Publish(4)
			require.NoError(t, err)

			cl := newClient(t, ClientConfig{})
			for _, start := range []uint64{0, 7} {
				var col collector
				res, err := cl.Replay(context.Background(), p.ReplayAddr, start, col.apply)
				require.NoError(t, err)
				require.Equal(t, seqRange(start, 10), col.seqs)
				require.True(t, res.Covered)
				require.Equal(t, layout, res.Layout)
				for _, s := range col.seqs {
					require.Equal(t, byte(0x93), col.data[s][0], "a 3-element msgpack batch")
				}
			}
			st, err := p.Status()
			require.NoError(t, err)
			require.Equal(t, 2, st.ReplayRequests)
			require.Zero(t, st.InvalidRequests)
		})
	}
}

func TestInteropReplayBufferTooOld(t *testing.T) {
	pytest.Require(t)
	defer leakcheck.Check(t)()
	p := pytest.Start(t, pytest.Config{Replay: true, Buffer: 5})
	defer p.Stop()
	_, _, err := p.Hide(12)
	require.NoError(t, err)
	var col collector
	res, err := newClient(t, ClientConfig{}).Replay(context.Background(), p.ReplayAddr, 3, col.apply)
	require.NoError(t, err)
	require.False(t, res.Covered)
	require.Equal(t, uint64(7), res.First)
	require.Equal(t, seqRange(7, 12), col.seqs)
}

func TestInteropReplaySilentAndPartialRouter(t *testing.T) {
	pytest.Require(t)
	defer leakcheck.Check(t)()
	p := pytest.Start(t, pytest.Config{Replay: true})
	defer p.Stop()
	_, _, err := p.Hide(6)
	require.NoError(t, err)
	// The idle deadline (1 s) must not expire before the Python router's
	// batches arrive, however late that process is scheduled on a loaded
	// machine. The silent replay ends on OpNoProgress, not on its 2 min
	// Timeout (which would end it with the attempt's own error).
	cl := newClient(t, ClientConfig{IdleTimeout: time.Second, Backoff: 10 * time.Millisecond})

	_, err = p.Command("replay-mode silent")
	require.NoError(t, err)
	res, err := cl.Replay(context.Background(), p.ReplayAddr, 0, (&collector{}).apply)
	var re *Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, OpNoProgress, re.Op)
	require.Zero(t, res.Batches)

	// Every answer stops after 2 batches without END: the client resumes
	// until nothing new arrives, then gives up.
	_, err = p.Command("replay-mode partial 2")
	require.NoError(t, err)
	var col collector
	res, err = cl.Replay(context.Background(), p.ReplayAddr, 0, col.apply)
	require.ErrorAs(t, err, &re)
	require.Equal(t, OpNoProgress, re.Op)
	require.Equal(t, seqRange(0, 6), col.seqs)
	require.Equal(t, 3+3, res.Attempts)
}
