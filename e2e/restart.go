package e2e

import (
	"context"
	"fmt"
	"io"
	"time"
)

// RestartResult is step 4: the gateway restarted on a warm fleet whose
// shared prompts were cached before the engines' replay window, once
// without and once with the index checkpoint.
type RestartResult struct {
	// WarmBatches is the number of KV-event batches the engines published
	// after the shared prompts were cached and before the restart (more
	// than ReplayBufferSteps: their BlockStored events are no longer
	// replayable).
	WarmBatches uint64
	// Cold and Checkpoint are the first requests after each restart.
	Cold, Checkpoint RestartRun
}

// RestartRun is what the first requests after one restart saw.
type RestartRun struct {
	Requests             int
	PredictedCachedShare float64 // the router's predicted cached tokens / prompt tokens
	HitRate              float64 // the engines' prefix-cache hits / queries over the same requests
}

// restart warms the fleet with shared system prompts until their stores
// are older than the engines' replay buffer, then restarts the precise
// gateway without the checkpoint and with it, printing what the router
// predicted against what the engines hit right after each restart.
func restart(ctx context.Context, c *cluster, o Options, w io.Writer) (RestartResult, error) {
	var res RestartResult
	if err := c.resetCaches(ctx); err != nil {
		return res, err
	}
	// One shared prompt per engine, sent to it directly (traffic from before
	// this gateway's time): cached first, then kept hot by requests that
	// reuse it (hits publish no BlockStored) while each request's own turn
	// makes the engine publish batches, until the prompt's stores fell out
	// of the engine's replay buffer. The gateway's router follows it all
	// through the engines' KV events.
	systems := make([]string, len(c.engines))
	for i := range systems {
		systems[i] = document(uint64(300+i), o.PrefixTokens)
	}
	start := c.published()
	q := 0
	for {
		oldest := ^uint64(0)
		for i, n := range c.published() {
			oldest = min(oldest, n-start[i])
		}
		if oldest > uint64(2*o.ReplayBufferSteps) {
			res.WarmBatches = oldest
			break
		}
		if q > 50*o.ReplayBufferSteps {
			return res, fmt.Errorf("the engines published only %d batches in %d requests", oldest, q)
		}
		q++
		e := q % len(c.engines)
		if _, err := send(ctx, c.client, c.engines[e].url+"/v1/chat/completions",
			chatBody(c.model, systems[e], document(uint64(10_000+q), 2*o.BlockSize), 2, false)); err != nil {
			return res, err
		}
	}
	if err := c.waitCaughtUp(ctx, 10*time.Second); err != nil {
		return res, err
	}
	fmt.Fprintf(w, "  warmed: a shared prompt cached on each engine, then %d KV-event batches per engine (replay buffer: %d)\n",
		res.WarmBatches, o.ReplayBufferSteps)

	for _, run := range []struct {
		name       string
		checkpoint bool
		out        *RestartRun
	}{{"without checkpoint", false, &res.Cold}, {"with checkpoint", true, &res.Checkpoint}} {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.gw.Shutdown(sctx) // writes the checkpoint
		cancel()
		if err != nil {
			return res, fmt.Errorf("gateway shutdown: %w", err)
		}
		cfg := replayOnly(c.gwCfg) // engine snapshots are step 5's
		if !run.checkpoint {
			cfg.Router.Checkpoint.Path = ""
		}
		if err := c.restartGateway(ctx, cfg, w); err != nil {
			return res, err
		}
		if err := c.waitCaughtUp(ctx, 10*time.Second); err != nil {
			return res, err
		}
		before, err := c.scrapeEngines(ctx)
		if err != nil {
			return res, err
		}
		var prompt, cached int
		n := 2 * len(systems)
		for i := 0; i < n; i++ {
			q++
			r, err := send(ctx, c.client, c.gw.URL()+"/v1/chat/completions",
				chatBody(c.model, systems[i%len(systems)], document(uint64(10_000+q), 2*o.BlockSize), 2, false))
			if err != nil {
				return res, err
			}
			prompt += r.PromptTokens
			cached += r.CachedTokens
		}
		after, err := c.scrapeEngines(ctx)
		if err != nil {
			return res, err
		}
		var hits, queries float64
		for i := range c.engines {
			hits += after[i].Sum(metricHits) - before[i].Sum(metricHits)
			queries += after[i].Sum(metricQueries) - before[i].Sum(metricQueries)
		}
		*run.out = RestartRun{Requests: n}
		if prompt > 0 {
			run.out.PredictedCachedShare = float64(cached) / float64(prompt)
		}
		if queries > 0 {
			run.out.HitRate = hits / queries
		}
		fmt.Fprintf(w, "  restarted %-19s first %d requests: predicted cached share %5.1f%%, engines' hit rate %5.1f%%\n",
			run.name+":", n, 100*run.out.PredictedCachedShare, 100*run.out.HitRate)
	}
	fmt.Fprintln(w, "  Without the checkpoint the router knows only the replay window: it misses the prompts the engines")
	fmt.Fprintln(w, "  cached before it (until they are recomputed somewhere) and routes blind to them; with the checkpoint")
	fmt.Fprintln(w, "  it resumes every event stream from the checkpoint's positions and its prediction tracks the hits.")
	return res, nil
}

// published returns the number of KV-event batches each engine published.
func (c *cluster) published() []uint64 {
	out := make([]uint64, len(c.engines))
	for i, e := range c.engines {
		out[i] = e.srv.Publisher().Stats().Published
	}
	return out
}

// waitCaughtUp waits until the precise gateway's router applied every batch
// each engine published.
func (c *cluster) waitCaughtUp(ctx context.Context, limit time.Duration) error {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ready := true
		for _, e := range c.engines {
			st, ok := c.pool.Status(e.id)
			n := e.srv.Publisher().Stats().Published
			if !ok || !st.Connected || st.Replaying || n == 0 || !st.HasApplied || st.Applied != n-1 {
				ready = false
			}
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("the restarted router did not catch up with the engines' KV events within %v", limit)
		case <-tick.C:
		}
	}
}
