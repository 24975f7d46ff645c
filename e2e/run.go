package e2e

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// Run runs the demo: it starts the engines and the gateways in-process,
// runs the six steps, prints what it sees to w, and stops everything
// before returning (after ctx ends when o.Hold is set). It returns what it
// measured, and an error when a step failed: the verification, or a burst
// that did not stay on one warm engine.
func Run(ctx context.Context, o Options, w io.Writer) (*Report, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	fmt.Fprintf(w, "kvroute demo: %d simulated vLLM engines (model %q, block size %d, %d KV blocks each) and a gateway, in this process\n",
		o.Engines, o.Model, o.BlockSize, o.EngineBlocks)
	c, err := startCluster(ctx, o)
	if err != nil {
		return nil, err
	}
	defer c.close()
	rep := &Report{}
	for _, e := range c.engines {
		rep.Engines = append(rep.Engines, e.id)
		fmt.Fprintf(w, "  engine   %s  KV events %s, replay %s, snapshot %s\n", e.url, e.srv.KVEventsEndpoint(), e.srv.ReplayEndpoint(), e.srv.SnapshotEndpoint())
	}
	fmt.Fprintf(w, "  gateway  %s  (precise prefix-cache routing)\n", c.gw.URL())
	fmt.Fprintf(w, "  gateway  %s  (round-robin, for the comparison)\n", c.rr.URL())

	section(w, "1. Deployment verification")
	if err := verify(ctx, c, w); err != nil {
		return rep, fmt.Errorf("verification: %w", err)
	}

	section(w, fmt.Sprintf("2. %d requests sharing a %d-token system prompt, %v apart", o.BurstRequests, o.PrefixTokens, o.Interval))
	rep.Burst, err = burst(ctx, c, o, w)
	rep.EventBatches = c.pool.Stats().Applied
	if err != nil {
		return rep, fmt.Errorf("burst: %w", err)
	}
	if rep.EventBatches == 0 {
		return rep, fmt.Errorf("burst: no KV-event batch reached the router")
	}
	fmt.Fprintf(w, "  KV events: the router applied %s from the engines (%s stored)\n",
		plural(rep.EventBatches, "event batch", "event batches"), plural(c.pool.Stats().StoredBlocks, "block", "blocks"))

	section(w, fmt.Sprintf("3. Shared-prefix load: %d system prompts of %d tokens, precise routing vs round-robin", o.LoadGroups, o.PrefixTokens))
	rep.Comparison, err = compare(ctx, c, o, w)
	rep.EventBatches = c.pool.Stats().Applied
	if err != nil {
		return rep, fmt.Errorf("comparison: %w", err)
	}

	section(w, "4. Gateway restart on a warm fleet, without and with the index checkpoint")
	if rep.Restart, err = restart(ctx, c, o, w); err != nil {
		return rep, fmt.Errorf("restart: %w", err)
	}

	section(w, "5. Every router replica restarted with no checkpoint and no peer: replay alone vs the engines' snapshots")
	if rep.Snapshot, err = snapshotRestart(ctx, c, o, w); err != nil {
		return rep, fmt.Errorf("snapshot restart: %w", err)
	}

	section(w, "6. The accuracy loop: predicted vs engine-reported cached tokens, with a suppressed event stream")
	if rep.Accuracy, err = accuracy(ctx, c, o, w); err != nil {
		return rep, fmt.Errorf("accuracy: %w", err)
	}

	section(w, fmt.Sprintf("Done in %v. Where to look next", time.Since(start).Round(time.Second)))
	whereNext(w, c)
	if o.Hold {
		fmt.Fprintf(w, "\nThe engines and gateways keep running (--hold): gateway %s (precise), %s (round-robin), engines %s; press Ctrl-C to stop.\n",
			c.gw.URL(), c.rr.URL(), strings.Join(c.engineURLs(), ", "))
		<-ctx.Done()
	}
	return rep, nil
}

func section(w io.Writer, title string) {
	fmt.Fprintf(w, "\n%s\n%s\n", title, strings.Repeat("-", len(title)))
}

func whereNext(w io.Writer, c *cluster) {
	fmt.Fprintf(w, `  go run ./examples/demo --hold       keep the engines and gateways up afterwards, to curl and scrape them
  go run ./examples/demo --help       every flag (--fast, --interval, --engine-blocks, --load-groups, --verbose ...)
  README, "Examples"                  the same pieces as separate processes: cmd/simengine and
                                      cmd/kvroute-gateway (its --help lists --endpoints, --events-port, --config ...)
  go run ./examples/calibrate --help  measure real engines' peak prefill throughput for the affinity filter

  What to watch (this run's addresses; they stay up with --hold):
    %s/metrics   llm_d_epp_prefix_predicted_cached_tokens and llm_d_epp_prefix_prompt_tokens
        (what the router predicted), llm_d_epp_token_producer_render_* (render calls),
        llm_d_epp_kv_cache_events_* (event streams), kvroute_gateway_* (the proxy)
    %s/metrics   vllm:prefix_cache_hits_total, vllm:prefix_cache_queries_total,
        vllm:request_success_total (what the engine did)
    the X-Kvroute-Endpoint response header: where the gateway sent a request
  A request of your own (the engines serve %q; a prompt needs more than one
  64-token block to show X-Kvroute-Cached-Tokens above 0):
    curl -si %s/v1/completions -H 'Content-Type: application/json' \
      -d '{"model":%q,"max_tokens":4,"prompt":"..."}' | grep -i x-kvroute
`, c.gw.URL(), c.engines[0].url, c.model, c.gw.URL(), c.model)
}

// plural returns "1 batch" or "n batches".
func plural(n uint64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
