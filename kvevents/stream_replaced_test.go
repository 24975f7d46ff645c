package kvevents

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/zmqpub"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/replay"
)

// queuedOn is the number of messages st has queued on its worker.
func queuedOn(st *stream) int {
	st.w.mu.Lock()
	defer st.w.mu.Unlock()
	return st.w.perEp[st].msgs
}

// blockWorker parks st's worker until the returned release is called, so
// that live messages stay queued. release may be called more than once (a
// deferred call lets a failing test close its pool).
func blockWorker(t *testing.T, st *stream) (release func()) {
	t.Helper()
	started, done := make(chan struct{}), make(chan struct{})
	var once sync.Once
	go st.onWorker(context.Background(), func(*wire.Decoder, *wire.Batch) {
		close(started)
		<-done
	})
	await(t, started, "the worker parked")
	return func() { once.Do(func() { close(done) }) }
}

// An endpoint whose events address changes gets a new stream: the old
// one's live messages, held behind its connect replay (which never gets an
// answer) or still queued on its worker, are dropped with it, and each one
// is counted once (dropped_total{reason="superseded"}), at the
// replacement, and nothing more whether the worker reaches the queued ones
// before the pool closes or not. Before, they vanished from every metric.
func TestPoolReplacedStreamCountsItsHeldAndQueuedMessages(t *testing.T) {
	for _, tc := range []struct {
		name       string
		closeFirst bool // the pool closes while the messages are still queued
	}{{"worker reaches them", false}, {"pool closes first", true}} {
		t.Run(tc.name, func(t *testing.T) {
			defer leakcheck.Check(t)()
			f := newReplaceFixture(t)
			defer f.close()
			p, logs, pub, pub2, accepted, ep := f.p, f.logs, f.pub, f.pub2, f.accepted, f.ep
			const id = replaceID
			require.NoError(t, p.Ensure(ep))
			publishUntilReceived(t, p, pub, id)
			await(t, accepted, "the connect replay's connection")
			old := p.stream(id)
			last := publishN(t, pub, 3)
			m := p.metrics()
			var held int
			require.Eventually(t, func() bool {
				old.mu.Lock()
				held = len(old.s.held)
				old.mu.Unlock()
				return statusOf(p, id).LastSeq == last && float64(held) == counter(m.MessagesReceived, id)
			}, poolWait, poolTick, "every received message held: %s", logs)
			require.Positive(t, held)

			release := blockWorker(t, old)
			defer release()
			const queued = 4
			publishN(t, pub, queued)
			require.Eventually(t, func() bool { return queuedOn(old) == queued }, poolWait, poolTick,
				"messages queued behind the parked worker: %d", queuedOn(old))

			ep.EventsAddress = pub2.Endpoint()
			require.NoError(t, p.Ensure(ep)) // returns once the old stream is closed
			require.NotSame(t, old, p.stream(id))
			require.Equal(t, float64(held+queued), counter(m.Dropped, id, string(dropSuperseded)),
				"held and queued messages, counted at the replacement: %s", logs)

			if tc.closeFirst {
				closed := make(chan error, 1)
				go func() { closed <- p.Close() }()
				await(t, p.stop, "the workers told to stop") // the worker may drain the queue, or handle it first
				release()
				require.NoError(t, await(t, closed, "the pool closed"))
			} else {
				release()
				require.Eventually(t, func() bool { return queuedOn(old) == 0 }, poolWait, poolTick)
				// The worker runs one thing at a time: once this runs, the
				// queued messages it took were handled.
				require.True(t, p.stream(id).sequenced(func() {}))
			}
			require.Equal(t, float64(held+queued), counter(m.Dropped, id, string(dropSuperseded)),
				"held and queued messages, each counted once: %s", logs)
			require.NoError(t, p.Close())
		})
	}
}

// checkPending reports whether st has a recorded position whose check has
// not ended.
func checkPending(st *stream) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.s.rs.pending
}

// An endpoint started from a recorded position (EnsureFrom) whose check —
// the replay from the position, which gets no answer here — has not ended
// when a new events address replaces its stream: the replacement clears
// the restored entries before the check could confirm or refute the
// position, and the resume is counted once, as superseded, as when a
// publisher restart or Resync clears them. Before, it was counted under no
// outcome at all.
func TestPoolReplacedStreamCountsItsPendingResume(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newReplaceFixture(t)
	defer f.close()
	p, logs, pub2, accepted, ep := f.p, f.logs, f.pub2, f.accepted, f.ep
	const id = replaceID
	require.NoError(t, p.EnsureFrom(ep, Position{Seq: 5, Digest: PayloadDigest(poolPayload(5))}))
	await(t, accepted, "the position check's connection") // started once the position was adopted
	old := p.stream(id)
	require.True(t, checkPending(old), logs.String())

	ep.EventsAddress = pub2.Endpoint()
	require.NoError(t, p.Ensure(ep)) // returns once the old stream is closed
	require.NotSame(t, old, p.stream(id))
	requireResumes := func(what string) {
		t.Helper()
		for _, r := range resumeOutcomes {
			want := 0.0
			if r == resumeSuperseded {
				want = 1
			}
			require.Equal(t, want, counter(p.rm.resumes, id, r), "%s: %s\n%s", what, r, logs)
		}
	}
	requireResumes("at the replacement")
	require.NoError(t, p.Close())
	requireResumes("closing counts nothing more")
}

// A stream replaced for a new events address while its worker is busy
// leaves live messages queued; the endpoint is then removed. The queued
// messages are counted (dropped_total{reason="superseded"}) at the
// replacement, and the worker reaching them after the removal counts
// nothing: no series of the removed endpoint comes back. Before, they were
// counted as the worker reached them, recreating the removed endpoint's
// dropped_total series (one per endpoint churned this way).
func TestPoolReplacedStreamQueuedMessagesLeaveNoSeriesAfterRemove(t *testing.T) {
	defer leakcheck.Check(t)()
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: "127.0.0.1:8000", Model: poolModel})
	defer pub.Close()
	pub2 := newTestPublisher(t, zmqpub.Config{Endpoint: "127.0.0.1:8000", Model: poolModel})
	defer pub2.Close()
	p, logs := newTestPool(t, PoolConfig{Concurrency: 1, TailProbeDelay: -1}, newPoolIndex(t))
	defer p.Close()
	const id = "127.0.0.1:8000"
	ep := Endpoint{ID: id, Model: poolModel, EventsAddress: pub.Endpoint()}
	require.NoError(t, p.Ensure(ep))
	waitApplied(t, p, id, publishUntilReceived(t, p, pub, id))
	old := p.stream(id)

	release := blockWorker(t, old)
	defer release()
	const queued = 3
	publishN(t, pub, queued)
	require.Eventually(t, func() bool { return queuedOn(old) == queued }, poolWait, poolTick,
		"messages queued behind the parked worker: %d", queuedOn(old))
	ep.EventsAddress = pub2.Endpoint()
	require.NoError(t, p.Ensure(ep)) // returns once the old stream is closed
	m := p.metrics()
	require.Equal(t, float64(queued), counter(m.Dropped, id, string(dropSuperseded)),
		"queued messages, counted at the replacement: %s", logs)

	p.Remove(id)
	require.Zero(t, seriesOf(t, p, id), "the removal deletes the endpoint's series")
	release()
	require.Eventually(t, func() bool { return queuedOn(old) == 0 }, poolWait, poolTick)
	// The worker runs one thing at a time: once this runs, the queued
	// messages it took were handled.
	require.True(t, old.onWorker(context.Background(), func(*wire.Decoder, *wire.Batch) {}))
	require.Zero(t, seriesOf(t, p, id), "a replaced stream's queued message recreated a removed endpoint's series: %s", logs)
	require.NoError(t, p.Close())
}

// replaceID is the endpoint a replaceFixture's pool follows.
const replaceID = "127.0.0.1:8000"

// replaceFixture is a pool of one worker following nothing yet, two
// publishers for the endpoint's old and new events address, and a replay
// peer that accepts connections and never answers (accepted is signalled
// per connection), so a connect replay or position check stays pending.
type replaceFixture struct {
	p         *Pool
	logs      *logBuffer
	pub, pub2 *zmqpub.Publisher
	accepted  <-chan struct{}
	ep        Endpoint // on pub's address, replaying from the silent peer
	stopPeer  func()
}

func newReplaceFixture(t *testing.T) *replaceFixture {
	t.Helper()
	f := &replaceFixture{}
	var raddr string
	raddr, f.accepted, f.stopPeer = startSilentPeer(t)
	f.pub = newTestPublisher(t, zmqpub.Config{Endpoint: replaceID, Model: poolModel})
	f.pub2 = newTestPublisher(t, zmqpub.Config{Endpoint: replaceID, Model: poolModel})
	f.p, f.logs = newTestPool(t, PoolConfig{Concurrency: 1, TailProbeDelay: -1, ReplayGrace: time.Hour,
		ReplayClient: replay.ClientConfig{IdleTimeout: time.Hour, Limiter: replay.NewLimiter(8)}}, newPoolIndex(t))
	f.ep = Endpoint{ID: replaceID, Model: poolModel, EventsAddress: f.pub.Endpoint(), ReplayAddress: raddr}
	return f
}

// close closes the pool, the publishers and the peer, in that order.
func (f *replaceFixture) close() {
	f.p.Close()
	f.pub2.Close()
	f.pub.Close()
	f.stopPeer()
}
