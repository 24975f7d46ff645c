package kvevents

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/zmqpub"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
)

// newTestPublisher starts the Go engine-side publisher (the one behind
// kvevents/publish, which these tests cannot import) on a loopback port.
func newTestPublisher(t testing.TB, cfg zmqpub.Config) *zmqpub.Publisher {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	p, err := zmqpub.New(cfg, zmqpub.Options{})
	require.NoError(t, err)
	return p
}

// Pool tests use the block layout of testdata/vllm_publisher.py so that Go
// and Python publishers produce the same batches: batch s stores poolBlocks
// blocks of poolBlockSize tokens, hashes (s+1)*1000+j, no parent, tokens
// (s*7919+i) % 50000.
const (
	poolBlocks    = 2
	poolBlockSize = 16
	poolModel     = "test-model"
	poolWait      = 15 * time.Second
	poolTick      = 5 * time.Millisecond
)

func poolTokens(seq uint64, blocks int) []uint32 {
	toks := make([]uint32, blocks*poolBlockSize)
	for i := range toks {
		toks[i] = uint32((seq*7919 + uint64(i)) % 50000)
	}
	return toks
}

// poolBatch is batch seq of the shared layout.
func poolBatch(seq uint64, blocks int) *wire.Batch {
	hashes := make([]uint64, blocks)
	for j := range hashes {
		hashes[j] = (seq+1)*1000 + uint64(j)
	}
	return &wire.Batch{TS: float64(seq), Events: []wire.Event{{
		Type: wire.EventBlockStored, BlockHashes: hashes, TokenIDs: poolTokens(seq, blocks),
		BlockSize: poolBlockSize, Medium: "GPU", HasGroup: true, Group: 0, Kind: "full_attention",
	}}, HasDPRank: true}
}

func poolPayload(seq uint64) []byte {
	return wire.AppendBatch(nil, poolBatch(seq, poolBlocks), wire.FormatVLLM)
}

func newPoolIndex(t testing.TB) *kvindex.Index {
	t.Helper()
	ix, err := kvindex.New(kvindex.Config{BlockSize: poolBlockSize, SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	t.Cleanup(ix.Close)
	return ix
}

// heldBlocks returns how many leading blocks of batch seq endpoint holds.
func heldBlocks(ix *kvindex.Index, endpoint string, seq uint64) int {
	keys := kvindex.Keys(nil, poolTokens(seq, poolBlocks), poolBlockSize, &kvindex.KeyParams{Model: poolModel})
	var res kvindex.MatchResult
	ix.Match(keys, []string{endpoint}, &res)
	return res.Endpoints()[0].Blocks
}

// requireHeld asserts that endpoint holds every block of batches first..last.
func requireHeld(t testing.TB, ix *kvindex.Index, endpoint string, first, last uint64) {
	t.Helper()
	for s := first; s <= last; s++ {
		require.Equal(t, poolBlocks, heldBlocks(ix, endpoint, s), "blocks of batch %d on %s", s, endpoint)
	}
}

// waitApplied waits until endpoint's index watermark reaches seq.
func waitApplied(t testing.TB, p *Pool, endpoint string, seq uint64) {
	t.Helper()
	require.Eventually(t, func() bool {
		st, ok := p.Status(endpoint)
		return ok && st.HasApplied && st.Applied >= seq && !st.Replaying
	}, poolWait, poolTick, "endpoint %s never applied seq %d: %+v", endpoint, seq, statusOf(p, endpoint))
}

// counter reads one series of a pool metric.
func counter(c *prometheus.CounterVec, labels ...string) float64 {
	return testutil.ToFloat64(c.WithLabelValues(labels...))
}

// seriesSum sums the series of c whose pod_identifier is id, whatever
// their other labels.
func seriesSum(c *prometheus.CounterVec, id string) float64 {
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	sum := 0.0
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) != nil {
			continue
		}
		for _, l := range d.GetLabel() {
			if l.GetName() == "pod_identifier" && l.GetValue() == id {
				sum += d.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// await waits for one value on ch.
func await[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(poolWait):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

// logBuffer collects log lines for assertions.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) count(s string) int { return strings.Count(l.String(), s) }

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// newTestPool builds a pool on ix with a fresh registry and a log buffer.
func newTestPool(t testing.TB, cfg PoolConfig, ix *kvindex.Index) (*Pool, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	p, err := NewPool(cfg, ix, Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry(), Logger: logs.logger()}})
	require.NoError(t, err)
	return p, logs
}

// publishUntilReceived publishes batches on pub until endpoint has received
// one (the subscription is live), and returns the last sequence published.
func publishUntilReceived(t testing.TB, p *Pool, pub *zmqpub.Publisher, endpoint string) uint64 {
	t.Helper()
	var last uint64
	require.Eventually(t, func() bool {
		seq, err := pub.Publish(poolPayload(pub.Stats().Published))
		require.NoError(t, err)
		last = seq
		st, _ := p.Status(endpoint)
		return st.Received
	}, poolWait, 20*time.Millisecond, "endpoint %s received nothing", endpoint)
	return last
}

// publishN publishes n more batches and returns the last sequence.
func publishN(t testing.TB, pub *zmqpub.Publisher, n int) uint64 {
	t.Helper()
	var last uint64
	for range n {
		seq, err := pub.Publish(poolPayload(pub.Stats().Published))
		require.NoError(t, err)
		last = seq
	}
	return last
}

func statusOf(p *Pool, endpoint string) EndpointStatus {
	st, _ := p.Status(endpoint)
	return st
}

// waitAppliedLogs is waitApplied that shows the pool's log on failure.
func waitAppliedLogs(t testing.TB, p *Pool, endpoint string, seq uint64, logs *logBuffer) {
	t.Helper()
	require.Eventually(t, func() bool {
		st, ok := p.Status(endpoint)
		return ok && st.HasApplied && st.Applied >= seq && !st.Replaying
	}, poolWait, poolTick, "endpoint %s never applied seq %d: %+v\n%s", endpoint, seq, statusOf(p, endpoint), logs)
}

// requireHeldLogs is requireHeld that shows the pool's log on failure.
func requireHeldLogs(t testing.TB, ix *kvindex.Index, endpoint string, first, last uint64, logs *logBuffer) {
	t.Helper()
	for s := first; s <= last; s++ {
		require.Equal(t, poolBlocks, heldBlocks(ix, endpoint, s), "blocks of batch %d on %s\n%s", s, endpoint, logs)
	}
}

// debugLogger logs at debug level into logs.
func debugLogger(logs *logBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
