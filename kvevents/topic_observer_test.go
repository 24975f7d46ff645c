package kvevents

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/pytest"
	"github.com/kvroute/kvroute/internal/zmqpub"
)

// topicLog records what a TopicObserver heard.
type topicLog struct {
	mu   sync.Mutex
	seen [][2]string
}

func (l *topicLog) observe(endpoint, model string) {
	l.mu.Lock()
	l.seen = append(l.seen, [2]string{endpoint, model})
	l.mu.Unlock()
}

func (l *topicLog) get() [][2]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([][2]string(nil), l.seen...)
}

// The observer hears each endpoint's topic model once per change, also when
// the endpoint has a configured model (which still keys the events).
func TestPoolObserveTopicsPerEndpoint(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: "127.0.0.1:8000", Model: "served-alias"})
	defer pub.Close()
	p, _ := newTestPool(t, PoolConfig{}, ix)
	defer p.Close()
	var log topicLog
	p.ObserveTopics(log.observe)
	const id = "127.0.0.1:8000"
	require.NoError(t, p.Ensure(Endpoint{ID: id, Model: poolModel, EventsAddress: pub.Endpoint()}))
	last := publishUntilReceived(t, p, pub, id)
	last = max(last, publishN(t, pub, 5))
	waitApplied(t, p, id, last)
	require.Equal(t, [][2]string{{id, "served-alias"}}, log.get(), "once, not per message")
	require.Equal(t, poolBlocks, heldBlocks(ix, id, last), "events are keyed by the configured model")

	p.ObserveTopics(nil)
	publishN(t, pub, 1)
	require.NoError(t, p.Close())
	require.Len(t, log.get(), 1)
}

// Bind mode: the observer hears the endpoint each topic names.
func TestPoolObserveTopicsBindMode(t *testing.T) {
	pytest.Require(t)
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	p, _ := newTestPool(t, PoolConfig{BindAddress: "127.0.0.1:0", BindAnyTopic: true}, ix)
	defer p.Close()
	var log topicLog
	p.ObserveTopics(log.observe)
	require.Eventually(t, func() bool { return p.bindAddr() != "" }, poolWait, poolTick)
	const other = "127.0.0.1:8001"
	b := pytest.Start(t, pytest.Config{Connect: p.bindAddr(), Topic: "kv@" + other + "@another-model"})
	defer b.Stop()
	waitApplied(t, p, other, pyPublishUntilReceived(t, p, b, other, 0))
	require.Contains(t, log.get(), [2]string{other, "another-model"})
	require.NoError(t, p.Close())
}
