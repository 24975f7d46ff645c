package publish

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/zmqx"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/telemetry"
)

func newTestPublisher(t testing.TB, cfg Config, opts ...Options) *Publisher {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	p, err := New(cfg, o)
	require.NoError(t, err)
	return p
}

// subscribe dials p with a go-zeromq SUB through the guarded transport and
// waits until the publisher holds the subscription (nothing is lost to the
// slow-joiner window).
func subscribe(t testing.TB, p *Publisher, prefix string) zmq4.Socket {
	t.Helper()
	s := zmqx.NewSub(context.Background(), zmqx.Options{IdleTimeout: 10 * time.Second}, nil)
	require.NoError(t, s.SetOption(zmq4.OptionSubscribe, prefix))
	require.NoError(t, zmqx.Dial(s, p.Endpoint()))
	require.Eventually(t, func() bool { return p.core.HasSubscription(prefix) }, 5*time.Second, 2*time.Millisecond)
	return s
}

// PublishBatch writes exactly wire.AppendBatch's bytes in the configured
// format, with consecutive sequences, under the kv@<endpoint>@<model> topic.
func TestPublishBatchEncodesInTheConfiguredFormat(t *testing.T) {
	defer leakcheck.Check(t)()
	for _, f := range []wire.Format{wire.FormatVLLM, wire.FormatSGLang} {
		p := newTestPublisher(t, Config{Endpoint: "10.0.0.1:8000", Model: "m", Format: f})
		s := subscribe(t, p, "")
		b := &wire.Batch{TS: 1.5, Events: []wire.Event{{Type: wire.EventAllBlocksCleared}}}
		for want := range uint64(2) {
			seq, err := p.PublishBatch(b)
			require.NoError(t, err)
			require.Equal(t, want, seq)
			m, err := s.Recv()
			require.NoError(t, err)
			require.Equal(t, "kv@10.0.0.1:8000@m", string(m.Frames[0]))
			require.Equal(t, wire.AppendBatch(nil, b, f), m.Frames[2])
		}
		require.NoError(t, zmqx.CloseDrain(s))
		require.NoError(t, p.Close())
		_, err := p.PublishBatch(b)
		require.ErrorIs(t, err, ErrClosed)
		_, err = p.Publish([]byte("x"))
		require.ErrorIs(t, err, ErrClosed)
	}
}

func TestConfigValidationJSONAndMetrics(t *testing.T) {
	defer leakcheck.Check(t)()
	for _, c := range []Config{
		{BufferSize: -1}, {SendQueue: -1}, {MaxSubscribers: -1}, {WriteTimeout: -1},
		{HandshakeTimeout: -1}, {Format: 99}, {ReplayLayout: "v9"}, {ReplayIdleTimeout: -1},
	} {
		require.Error(t, c.Validate(), "%+v", c)
		_, err := New(c, Options{})
		require.Error(t, err, "%+v", c)
	}

	var c Config
	require.NoError(t, json.Unmarshal([]byte(`{"addr": "127.0.0.1:0", "writeTimeout": "250ms", "topic": "t"}`), &c))
	require.Equal(t, 250*time.Millisecond, c.WriteTimeout)
	require.ErrorContains(t, json.Unmarshal([]byte(`{"writeTimeout": 250}`), &c), "not a duration")
	require.ErrorContains(t, json.Unmarshal([]byte(`{"adr": "x"}`), &c), "adr: unknown key")
	out, err := json.Marshal(Config{HandshakeTimeout: time.Second})
	require.NoError(t, err)
	require.Contains(t, string(out), `"handshakeTimeout":"1s"`)

	reg := prometheus.NewRegistry()
	p := newTestPublisher(t, Config{}, Options{Set: telemetry.Set{Registerer: reg}})
	defer p.Close()
	require.Empty(t, p.Topic(), "vLLM's default topic")
	require.Empty(t, p.ReplayEndpoint())
	_, err = p.Publish(nil)
	require.ErrorIs(t, err, ErrEmptyPayload)
	_, err = p.Publish([]byte("x"))
	require.NoError(t, err)
	require.Equal(t, Stats{Published: 1}, p.Stats())
	n, err := testutil.GatherAndCount(reg, "kvroute_publisher_batches_total", "kvroute_publisher_dropped_total", "kvroute_publisher_subscribers")
	require.NoError(t, err)
	require.Equal(t, 3, n)
	_, err = New(Config{Addr: "127.0.0.1:0"}, Options{Set: telemetry.Set{Registerer: reg}})
	require.Error(t, err, "duplicate metrics")
}

// Every wire format AppendBatch writes is a valid publisher format:
// TensorRT-LLM's and SGLang's map events included.
func TestConfigAcceptsEveryWireFormat(t *testing.T) {
	defer leakcheck.Check(t)()
	for _, f := range []wire.Format{wire.FormatVLLM, wire.FormatVLLMLegacy, wire.FormatSGLang,
		wire.FormatVLLMMapBatch, wire.FormatTRTLLM, wire.FormatSGLangMap} {
		require.NoError(t, Config{Format: f}.Validate(), "%v", f)
		p := newTestPublisher(t, Config{Endpoint: "10.0.0.1:8000", Model: "m", Format: f})
		s := subscribe(t, p, "")
		b := &wire.Batch{TS: 1.5, Events: []wire.Event{{Type: wire.EventBlockRemoved, BlockHashes: []uint64{7}, Medium: "GPU"}}}
		_, err := p.PublishBatch(b)
		require.NoError(t, err)
		m, err := s.Recv()
		require.NoError(t, err)
		require.Equal(t, wire.AppendBatch(nil, b, f), m.Frames[2], "%v", f)
		require.NoError(t, zmqx.CloseDrain(s))
		require.NoError(t, p.Close())
	}
	require.Error(t, Config{Format: wire.FormatSGLangMap + 1}.Validate())
}
