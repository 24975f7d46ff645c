package e2e

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/gateway"
)

// SnapshotResult is step 5: every router replica of a warm fleet restarted
// with no checkpoint and no peer, once rebuilding from the engines' replay
// buffers alone and once from the engines' KV-cache snapshots.
type SnapshotResult struct {
	// ReplayOnly and Snapshot are the two restarts.
	ReplayOnly, Snapshot SnapshotRun
}

// SnapshotRun is what one restart rebuilt.
type SnapshotRun struct {
	// CaughtUp is how long after the gateway started its index had applied
	// every batch the engines had published.
	CaughtUp time.Duration
	// IndexedBlocks is the blocks the router's index held for the engines
	// then; EngineBlocks the blocks the engines held (hittable).
	IndexedBlocks, EngineBlocks int
	// First are the first requests after the restart.
	First RestartRun
}

// Coverage is IndexedBlocks / EngineBlocks.
func (r SnapshotRun) Coverage() float64 {
	if r.EngineBlocks == 0 {
		return 0
	}
	return float64(r.IndexedBlocks) / float64(r.EngineBlocks)
}

// replayOnly is cfg with the engines' snapshot sockets left out: the
// router rebuilds each endpoint from its replay buffer alone.
func replayOnly(cfg gateway.ServerConfig) gateway.ServerConfig {
	eps := make([]kvroute.Endpoint, len(cfg.Endpoints))
	for i, e := range cfg.Endpoints {
		e.SnapshotAddress = ""
		eps[i] = e
	}
	cfg.Endpoints = eps
	return cfg
}

// snapshotRestart restarts the precise gateway twice with no checkpoint
// (and no peer): first from the replay buffers alone, then with the
// engines' snapshots, after step 4 left shared prompts on the engines
// whose stores are older than their replay windows.
func snapshotRestart(ctx context.Context, c *cluster, o Options, w io.Writer) (SnapshotResult, error) {
	var res SnapshotResult
	systems := make([]string, len(c.engines))
	for i := range systems {
		systems[i] = document(uint64(300+i), o.PrefixTokens) // step 4's shared prompts, still cached
	}
	q := 0
	if err := ageBeyondReplay(ctx, c, o, systems, &q); err != nil {
		return res, err
	}
	for _, run := range []struct {
		name     string
		snapshot bool
		out      *SnapshotRun
	}{{"replay alone:", false, &res.ReplayOnly}, {"engine snapshots:", true, &res.Snapshot}} {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.gw.Shutdown(sctx)
		cancel()
		if err != nil {
			return res, fmt.Errorf("gateway shutdown: %w", err)
		}
		cfg := c.gwCfg
		cfg.Router.Checkpoint.Path = "" // no checkpoint, and the demo runs no peer
		if !run.snapshot {
			cfg = replayOnly(cfg)
		}
		start := time.Now()
		if err := c.restartGateway(ctx, cfg, w); err != nil {
			return res, err
		}
		if err := c.waitCaughtUp(ctx, 30*time.Second); err != nil {
			return res, err
		}
		run.out.CaughtUp = time.Since(start)
		for _, e := range c.engines {
			run.out.IndexedBlocks += c.gw.Router().Index().EndpointBlocks(e.id)
			run.out.EngineBlocks += e.srv.Engine().Stats().CachedBlocks
		}
		if run.out.First, err = firstRequests(ctx, c, o, systems, &q); err != nil {
			return res, err
		}
		fmt.Fprintf(w, "  %-18s index complete after %6v: %5d of the engines' %5d cached blocks (%5.1f%%); first %d requests: predicted cached share %5.1f%%, engines' hit rate %5.1f%%\n",
			run.name, run.out.CaughtUp.Round(time.Millisecond), run.out.IndexedBlocks, run.out.EngineBlocks,
			100*run.out.Coverage(), run.out.First.Requests, 100*run.out.First.PredictedCachedShare, 100*run.out.First.HitRate)
	}
	fmt.Fprintln(w, "  From the replay buffers alone the router misses every prefix cached before the engines' replay window;")
	fmt.Fprintln(w, "  from the engines' snapshots (vLLM's snapshot_endpoint) it indexes their whole caches within seconds.")
	return res, nil
}

// ageBeyondReplay keeps the shared prompts hot on their engines (sent to
// them directly: hits publish no store) while each request's own turn makes
// the engines publish, until the prompts' stores are older than twice the
// engines' replay buffers.
func ageBeyondReplay(ctx context.Context, c *cluster, o Options, systems []string, q *int) error {
	start := c.published()
	for sent := 0; ; sent++ {
		oldest := ^uint64(0)
		for i, n := range c.published() {
			oldest = min(oldest, n-start[i])
		}
		if oldest > uint64(2*o.ReplayBufferSteps) {
			return c.waitCaughtUp(ctx, 10*time.Second)
		}
		if sent > 50*o.ReplayBufferSteps {
			return fmt.Errorf("the engines published only %d batches in %d requests", oldest, sent)
		}
		*q++
		e := *q % len(c.engines)
		if _, err := send(ctx, c.client, c.engines[e].url+"/v1/chat/completions",
			chatBody(c.model, systems[e], document(uint64(40_000+*q), 2*o.BlockSize), 2, false)); err != nil {
			return err
		}
	}
}

// firstRequests sends two requests per shared prompt through the precise
// gateway and reports what the router predicted against what the engines
// hit.
func firstRequests(ctx context.Context, c *cluster, o Options, systems []string, q *int) (RestartRun, error) {
	before, err := c.scrapeEngines(ctx)
	if err != nil {
		return RestartRun{}, err
	}
	var prompt, cached int
	n := 2 * len(systems)
	for i := range n {
		*q++
		r, err := send(ctx, c.client, c.gw.URL()+"/v1/chat/completions",
			chatBody(c.model, systems[i%len(systems)], document(uint64(40_000+*q), 2*o.BlockSize), 2, false))
		if err != nil {
			return RestartRun{}, err
		}
		prompt += r.PromptTokens
		cached += r.CachedTokens
	}
	after, err := c.scrapeEngines(ctx)
	if err != nil {
		return RestartRun{}, err
	}
	var hits, queries float64
	for i := range c.engines {
		hits += after[i].Sum(metricHits) - before[i].Sum(metricHits)
		queries += after[i].Sum(metricQueries) - before[i].Sum(metricQueries)
	}
	out := RestartRun{Requests: n}
	if prompt > 0 {
		out.PredictedCachedShare = float64(cached) / float64(prompt)
	}
	if queries > 0 {
		out.HitRate = hits / queries
	}
	return out, nil
}
