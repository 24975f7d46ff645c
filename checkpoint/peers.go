package checkpoint

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
)

// maxHedgeDelay bounds how long the peer asked may take to begin sending
// its snapshot before the next peer is asked too.
const maxHedgeDelay = time.Second

// errPeerStalled is a peer that sent nothing for its progress timeout; it
// is counted as result "timeout".
var errPeerStalled = errors.New("kvroute: peer stalled")

// errPeerBusy is a peer answering 503 with Retry-After: serving as many
// snapshots as it will at once. It is counted as result "busy".
var errPeerBusy = errors.New("kvroute: peer busy")

// minRetryAfter is the least wait before a busy peer is asked again,
// whatever its Retry-After says ("0" included), so that a bootstrap never
// hammers a peer.
const minRetryAfter = time.Second

// clockKey is the context key of the clock a peer race runs on.
type clockKey struct{}

// withClock returns ctx carrying clk, the clock of the peer races run under
// it: an IndexSource's Load has no other way in, and restore gives the
// races its Options' clock so that tests drive the hedge and the stall
// watches with telemetry.Manual.
func withClock(ctx context.Context, clk telemetry.Clock) context.Context {
	return context.WithValue(ctx, clockKey{}, clk)
}

// clockOf returns the clock ctx carries, or the wall clock.
func clockOf(ctx context.Context) telemetry.Clock {
	if clk, ok := ctx.Value(clockKey{}).(telemetry.Clock); ok && clk != nil {
		return clk
	}
	return telemetry.Wall
}

// peerReport receives the outcome of one peer of a race: loaded (err nil)
// or failed.
type peerReport func(p PeerSource, info kvindex.SnapshotInfo, err error, elapsed time.Duration)

// peerSources is a source that races several peers (the configured peers,
// a pool's live replicas). restore counts and logs each peer's outcome
// through report, and timeout bounds each peer's transfer rather than the
// whole race.
type peerSources interface {
	IndexSource
	loadPeers(ctx context.Context, ix *kvindex.Index, timeout time.Duration, report peerReport) (kvindex.SnapshotInfo, error)
}

// configuredPeers are BootstrapConfig.Peers, raced as one source.
type configuredPeers []PeerSource

func (configuredPeers) Kind() string { return "peer" }

func (ps configuredPeers) String() string {
	urls := make([]string, len(ps))
	for i, p := range ps {
		urls[i] = p.URL
	}
	return strings.Join(urls, ", ")
}

func (ps configuredPeers) Load(ctx context.Context, ix *kvindex.Index) (kvindex.SnapshotInfo, error) {
	return ps.loadPeers(ctx, ix, 0, nil)
}

func (ps configuredPeers) loadPeers(ctx context.Context, ix *kvindex.Index, timeout time.Duration, report peerReport) (kvindex.SnapshotInfo, error) {
	return racePeers(ctx, ix, ps, timeout, report)
}

// racePeers loads ix from the first of peers to deliver a valid snapshot.
// The first peer is asked; whenever no peer asked has begun sending its
// snapshot within the hedge delay (half the shortest progress timeout, at
// most a second), the next one is asked too. The first to send a byte of
// its snapshot is loaded and the others are cancelled, to be asked again,
// in their order, should it fail. A peer that sends nothing for its
// progress timeout — before its headers or mid-stream — is abandoned with
// errPeerStalled; timeout (0: none) bounds one peer's whole transfer.
//
// A peer that answers 503 with Retry-After (busy serving other peers) is
// asked again once that time has passed, but only when no other peer is
// left to ask or running, and only when the time falls within timeout
// (DefaultBootstrapTimeout when 0) of the race's start; otherwise its
// refusal stands.
//
// report (nil: none) is called once for each peer that loaded or failed;
// peers cancelled because another began first, or because ctx ended, are
// not reported. When ctx ends, racePeers returns its error promptly,
// leaving ix empty, unless a peer's snapshot has loaded whole by then: that
// one is kept, reported and returned. The hedge and the progress watches run on the clock ctx
// carries (withClock; the wall clock without); timeout is a wall-clock
// bound on the HTTP transfer.
//
// Ownership: the calling goroutine owns queue, running, errs and the hedge
// timer, and starts one goroutine per peer asked (ask), which runs the
// attempt's open and ends by sending the attempt on results, buffered for
// every peer so that the send never blocks. racePeers receives every
// attempt it started before it returns (stopAll cancels and collects those
// still running); it loads the one that began first, closes each and
// calls report on the calling goroutine. The hedge is re-armed before each
// ask, so that once a peer has the request the hedge is armed for it: a
// test that waits for the request and then advances a Manual clock past
// the hedge delay fires that hedge, never one a late re-arm discards.
func racePeers(ctx context.Context, ix *kvindex.Index, peers []PeerSource, timeout time.Duration, report peerReport) (kvindex.SnapshotInfo, error) {
	if len(peers) == 0 {
		return kvindex.SnapshotInfo{}, fmt.Errorf("%w: no peer", ErrNoSnapshot)
	}
	if report == nil {
		report = func(PeerSource, kvindex.SnapshotInfo, error, time.Duration) {}
	}
	clk := clockOf(ctx)
	hedgeDelay := maxHedgeDelay
	for _, p := range peers {
		hedgeDelay = min(hedgeDelay, p.progressTimeout()/2)
	}
	queue := make([]int, len(peers)) // peers not asked, by index
	for i := range queue {
		queue[i] = i
	}
	results := make(chan *peerAttempt, len(peers))
	running := map[*peerAttempt]struct{}{}
	ask := func() {
		a := &peerAttempt{peer: queue[0], src: peers[queue[0]], clk: clk, start: clk.Now()}
		queue = queue[1:]
		running[a] = struct{}{}
		if timeout > 0 {
			a.ctx, a.cancel = context.WithTimeout(ctx, timeout)
		} else {
			a.ctx, a.cancel = context.WithCancel(ctx)
		}
		go func() {
			a.open()
			results <- a
		}()
	}
	// stopAll cancels every running attempt and waits for it; the peers go
	// back to the front of the queue in their order.
	stopAll := func() {
		for a := range running {
			a.cancel()
		}
		for len(running) > 0 {
			a := <-results
			delete(running, a)
			a.close()
			queue = append(queue, a.peer)
		}
		slices.Sort(queue)
	}
	hedge := clk.NewTimer(hedgeDelay)
	defer hedge.Stop()
	bound := timeout
	if bound <= 0 {
		bound = DefaultBootstrapTimeout
	}
	deadline := clk.Now().Add(bound) // of the waits for busy peers
	type busyPeer struct {
		peer int
		at   time.Time
	}
	var later []busyPeer // busy peers to ask again, by time
	var errs []error
	for {
		if len(running) == 0 && len(queue) == 0 && len(later) > 0 {
			// Every other peer failed: wait for the first busy one's time.
			wait := clk.NewTimer(later[0].at.Sub(clk.Now()))
			select {
			case <-ctx.Done():
				wait.Stop()
				return kvindex.SnapshotInfo{}, fmt.Errorf("kvroute: loading from peers: %w", context.Cause(ctx))
			case <-wait.C():
			}
			now := clk.Now()
			for len(later) > 0 && !later[0].at.After(now) {
				queue = append(queue, later[0].peer)
				later = later[1:]
			}
			slices.Sort(queue)
			if len(queue) == 0 {
				continue
			}
		}
		if len(running) == 0 {
			if len(queue) == 0 {
				if len(errs) == 1 {
					return kvindex.SnapshotInfo{}, errs[0]
				}
				return kvindex.SnapshotInfo{}, fmt.Errorf("kvroute: no peer delivered a valid snapshot: %w", errors.Join(errs...))
			}
			hedge.Reset(hedgeDelay) // before the ask: a peer that has the request sees the hedge armed
			ask()
		}
		select {
		case <-ctx.Done():
			stopAll()
			return kvindex.SnapshotInfo{}, fmt.Errorf("kvroute: loading from peers: %w", context.Cause(ctx))
		case <-hedge.C():
			hedge.Reset(hedgeDelay)
			if len(queue) > 0 {
				ask()
			}
		case a := <-results:
			delete(running, a)
			if a.err == nil {
				stopAll() // a began sending: the others wait
				a.load(ix)
			}
			a.close()
			if a.err != nil && ctx.Err() != nil { // a snapshot loaded as ctx ended is kept, as restore keeps a source's
				stopAll()
				return kvindex.SnapshotInfo{}, fmt.Errorf("kvroute: loading from peers: %w", context.Cause(ctx))
			}
			report(a.src, a.info, a.err, clk.Now().Sub(a.start))
			if a.err == nil {
				return a.info, nil
			}
			errs = append(errs, a.err)
			if a.retryAfter > 0 {
				if at := clk.Now().Add(max(a.retryAfter, minRetryAfter)); !at.After(deadline) {
					i, _ := slices.BinarySearchFunc(later, at, func(b busyPeer, t time.Time) int { return b.at.Compare(t) })
					later = slices.Insert(later, i, busyPeer{peer: a.peer, at: at})
				}
			}
		}
	}
}

// peerAttempt is one request to a peer, watched for progress.
//
// Ownership: racePeers sets peer, src, clk, start, ctx and cancel before
// it starts the attempt's goroutine, and they are not written after. That
// goroutine (open) owns watch, body, snap and err until it sends the
// attempt on the race's results; from then on the race's goroutine owns
// the whole attempt (load sets info and err, close releases it). cancel
// may be called meanwhile, by the race and by the progress watch's timer.
type peerAttempt struct {
	peer   int // index in the race's peers
	src    PeerSource
	clk    telemetry.Clock // of the progress watch
	start  time.Time
	ctx    context.Context
	cancel context.CancelFunc
	watch  *progressWatch
	body   io.ReadCloser
	snap   *bufio.Reader // the body, its first byte received
	info   kvindex.SnapshotInfo
	err    error
	// retryAfter is the Retry-After of a busy peer's 503 (0: none).
	retryAfter time.Duration
}

// open requests the snapshot and waits for its first byte; a.err is set
// when the peer fails before.
func (a *peerAttempt) open() {
	s := a.src
	a.watch = newProgressWatch(a.clk, s.progressTimeout(), a.cancel)
	req, err := http.NewRequestWithContext(a.ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		a.err = fmt.Errorf("kvroute: peer %s: %w", s.URL, err)
		return
	}
	if s.Token != "" { // a proof of the token for this URL, not the token (see Keeper.Handler)
		req.Header.Set("Authorization", snapshotAuthorization(s.Token, s.URL, a.clk.Now()))
	}
	req.Header.Set("Accept", SnapshotContentType)
	c := s.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	a.watch.idle()
	if err != nil {
		a.err = fmt.Errorf("kvroute: peer %s: %w", s.URL, a.watch.cause(err))
		return
	}
	a.body = resp.Body
	if resp.StatusCode != http.StatusOK {
		// The refusal's body is read (for the connection's reuse) under the
		// progress watch too: a peer that stalls in it is abandoned, not
		// waited for as long as it keeps the connection open.
		_, _ = io.Copy(io.Discard, io.LimitReader(&watchedBody{r: resp.Body, w: a.watch}, 4096))
		a.err = fmt.Errorf("%w: peer %s answered %s", errPeerStatus, s.URL, resp.Status)
		if resp.StatusCode == http.StatusServiceUnavailable {
			if d, ok := retryAfter(resp.Header.Get("Retry-After"), a.clk.Now()); ok {
				a.retryAfter = max(d, time.Nanosecond)
				a.err = fmt.Errorf("%w: peer %s answered %s, Retry-After %v", errPeerBusy, s.URL, resp.Status, d)
			}
		}
		return
	}
	a.snap = bufio.NewReaderSize(&watchedBody{r: resp.Body, w: a.watch}, 64<<10)
	if _, err := a.snap.Peek(1); err != nil {
		a.err = fmt.Errorf("kvroute: peer %s: %w", s.URL, snapshotStartError(err))
	}
}

// retryAfter reads a Retry-After value, delay-seconds or an HTTP date
// (RFC 9110, section 10.2.3), as a wait from now (0 for a date past).
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		return time.Duration(min(n, int64(time.Duration(math.MaxInt64)/time.Second))) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// load reads the snapshot into ix, setting a.info and a.err.
func (a *peerAttempt) load(ix *kvindex.Index) {
	a.info, a.err = ix.ReadSnapshot(a.snap, kvindex.SnapshotReadOptions{MaxSectionBytes: a.src.MaxSectionBytes, MaxEndpoints: a.src.MaxEndpoints})
	if a.err != nil {
		a.err = fmt.Errorf("kvroute: peer %s: %w", a.src.URL, a.err)
	}
}

// close releases the attempt's connection, watch and context.
func (a *peerAttempt) close() {
	if a.watch != nil {
		a.watch.stop()
	}
	a.cancel()
	if a.body != nil {
		_ = a.body.Close()
	}
}

// snapshotStartError is the refusal of a snapshot whose first byte could
// not be read, as ReadSnapshot would report it.
func snapshotStartError(err error) error {
	if errors.Is(err, errPeerStalled) {
		return err
	}
	if err == io.EOF {
		return &kvindex.SnapshotError{Reason: kvindex.SnapshotReasonTruncated, Err: kvindex.ErrSnapshotTruncated, Detail: "reading header"}
	}
	return &kvindex.SnapshotError{Reason: kvindex.SnapshotReasonRead, Err: kvindex.ErrSnapshotRead, Detail: "reading header", Cause: err}
}

// progressWatch cancels a request whose peer sends nothing for d while it
// is waited for: from the request to its response headers, and during each
// read of the body. Time spent applying what arrived does not count, so a
// healthy peer is never abandoned because the index is slow to load a
// large section.
type progressWatch struct {
	d       time.Duration
	timer   telemetry.Timer
	stalled atomic.Bool
}

// newProgressWatch returns a watch on clk that is waiting (for the response
// headers).
func newProgressWatch(clk telemetry.Clock, d time.Duration, cancel context.CancelFunc) *progressWatch {
	w := &progressWatch{d: d}
	w.timer = clk.AfterFunc(d, func() {
		w.stalled.Store(true)
		cancel()
	})
	return w
}

// waiting starts a wait of at most d for the peer.
func (w *progressWatch) waiting() { w.timer.Reset(w.d) }

// idle ends the wait: the peer answered.
func (w *progressWatch) idle() { w.timer.Stop() }

func (w *progressWatch) stop() { w.timer.Stop() }

// cause returns errPeerStalled for an error caused by the watch's
// cancellation, err otherwise.
func (w *progressWatch) cause(err error) error {
	if err != nil && err != io.EOF && w.stalled.Load() {
		return fmt.Errorf("%w: nothing received for %v", errPeerStalled, w.d)
	}
	return err
}

// watchedBody is a response body each of whose reads is watched.
type watchedBody struct {
	r io.Reader
	w *progressWatch
}

func (b *watchedBody) Read(p []byte) (int, error) {
	b.w.waiting()
	n, err := b.r.Read(p)
	b.w.idle()
	return n, b.w.cause(err)
}
