package wire_test

import (
	"context"
	"encoding/hex"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/pytest"
	"github.com/kvroute/kvroute/internal/zmqx"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// recvFrom subscribes to py and returns the first live message, publishing
// one batch at a time until one arrives (a slow joiner loses the first).
func recvFrom(t *testing.T, py *pytest.Publisher) zmq4.Msg {
	t.Helper()
	sub := zmqx.NewSub(context.Background(), zmqx.Options{IdleTimeout: 10 * time.Second}, nil)
	defer zmqx.CloseDrain(sub)
	require.NoError(t, sub.SetOption(zmq4.OptionSubscribe, "kv@"))
	require.NoError(t, zmqx.Dial(sub, py.PubAddr))
	got := make(chan zmq4.Msg, 1)
	go func() {
		defer close(got)
		if m, err := sub.Recv(); err == nil {
			got <- m
		}
	}()
	deadline := time.After(10 * time.Second)
	for {
		_, _, err := py.Publish(1)
		require.NoError(t, err)
		select {
		case m := <-got:
			return m
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatal("no message from the libzmq publisher")
		}
	}
}

// The Python publisher encodes with Debian's msgpack in the engines'
// declaration order: what it sends as vLLM's snapshot revision (identity
// after the rank) and as TensorRT-LLM decodes to the identity and fields it
// wrote, and AppendBatch re-encodes it byte for byte in the matching
// format, so a Go publisher of either is indistinguishable on the wire.
func TestInteropPythonEncodingsRoundTrip(t *testing.T) {
	pytest.Require(t)
	for _, c := range []struct {
		name string
		cfg  pytest.Config
		f    wire.Format
	}{
		{"vllm-snapshot", pytest.Config{Identity: "payload", HeartbeatEvery: time.Hour}, wire.FormatVLLM},
		{"trtllm", pytest.Config{Format: "trtllm"}, wire.FormatTRTLLM},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer leakcheck.Check(t)()
			py := pytest.Start(t, c.cfg)
			defer py.Stop()
			m := recvFrom(t, py)
			require.Len(t, m.Frames, 3)
			payload := m.Frames[2]
			var b wire.Batch
			require.NoError(t, wire.NewDecoder(wire.Limits{}).Decode(payload, &b))
			require.Len(t, b.Events, 1)
			e := b.Events[0]
			require.Equal(t, wire.EventBlockStored, e.Type)
			require.Equal(t, "GPU", e.Medium)
			st, err := py.Status()
			require.NoError(t, err)
			if c.cfg.Identity != "" {
				require.True(t, b.HasPublisherID)
				require.Equal(t, st.PublisherID, hex.EncodeToString(b.PublisherID[:]))
			} else {
				require.False(t, b.HasPublisherID)
				require.False(t, e.HasGroup, "TensorRT-LLM writes no group_idx")
				require.Empty(t, e.Kind)
			}
			require.Equal(t, hex.EncodeToString(payload), hex.EncodeToString(wire.AppendBatch(nil, &b, c.f)))
			require.NoError(t, py.Stop())
		})
	}
}
