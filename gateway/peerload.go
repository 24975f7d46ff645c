package gateway

import (
	"sync"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/telemetry"
)

// peerFeed carries out ServerConfig.PeerLoadFromMetrics: on every tick of
// the engine scraper's interval it estimates, from each endpoint's last
// scraped queue, the load the other gateway replicas carry there
// (enginemetrics.PeerLoads) and gives it to the Router's load tracker. An
// endpoint whose signal is unknown or stale gets no estimate (its peer load
// is cleared: it is routed on this replica's own load).
//
// Ownership: the feed's goroutine owns sigs; stop and done are closed once,
// by close and by the goroutine.
type peerFeed struct {
	sc        *enginemetrics.Scraper
	r         *kvroute.Router
	endpoints func() []kvroute.Endpoint
	sigs      map[string]enginemetrics.Signal
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// startPeerFeed starts the feed's goroutine; close stops it.
func startPeerFeed(sc *enginemetrics.Scraper, r *kvroute.Router, endpoints func() []kvroute.Endpoint, clk telemetry.Clock) *peerFeed {
	f := &peerFeed{sc: sc, r: r, endpoints: endpoints, sigs: map[string]enginemetrics.Signal{},
		stop: make(chan struct{}), done: make(chan struct{})}
	tick := clk.NewTicker(sc.Interval())
	go func() {
		defer close(f.done)
		defer tick.Stop()
		for {
			select {
			case <-f.stop:
				return
			case <-tick.C():
				f.update()
			}
		}
	}()
	return f
}

// update estimates and sets the peers' load once.
func (f *peerFeed) update() {
	clear(f.sigs)
	for _, ep := range f.endpoints() {
		if sig, ok := f.sc.Signal(ep); ok {
			f.sigs[ep.ID] = sig
		}
	}
	t := f.r.Load()
	t.SetPeerLoads(enginemetrics.PeerLoads(f.sigs, t.LocalLoad))
}

// close stops the feed and waits for its goroutine. It is idempotent and
// nil-safe.
func (f *peerFeed) close() {
	if f == nil {
		return
	}
	f.closeOnce.Do(func() { close(f.stop) })
	<-f.done
}
