package e2e

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"
)

// Metric names read from the engines and the gateway.
const (
	metricSuccess   = "vllm:request_success_total"
	metricHits      = "vllm:prefix_cache_hits_total"
	metricQueries   = "vllm:prefix_cache_queries_total"
	metricPredicted = "llm_d_epp_prefix_predicted_cached_tokens_sum"
	metricPrompt    = "llm_d_epp_prefix_prompt_tokens_sum"
)

// Pass thresholds of the burst: the top engine must have served at least
// burstMinShare of the requests with a hit rate of at least burstMinHitRate.
// One cold request in ten caps the hit rate near 0.87 for a ~2,000-token
// prefix and a short question.
const (
	burstMinShare   = 0.8
	burstMinHitRate = 0.7
)

// burst sends o.BurstRequests chat requests sharing one long system prompt,
// o.Interval apart, and checks that precise routing kept them on one engine,
// which served them from its prefix cache.
func burst(ctx context.Context, c *cluster, o Options, w io.Writer) (Burst, error) {
	res := Burst{Requests: o.BurstRequests, Routed: map[string]int{}, Succeeded: map[string]float64{}, HitRate: map[string]float64{}}
	system := document(1, o.PrefixTokens)
	engBefore, err := c.scrapeEngines(ctx)
	if err != nil {
		return res, err
	}
	gwBefore, err := Scrape(ctx, c.client, c.gw.URL())
	if err != nil {
		return res, err
	}
	for i := range o.BurstRequests {
		if i > 0 {
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(o.Interval):
			}
		}
		r, err := send(ctx, c.client, c.gw.URL()+"/v1/chat/completions", chatBody(c.model, system, question(i), 16, false))
		if err != nil {
			return res, err
		}
		res.Routed[r.Endpoint]++
		fmt.Fprintf(w, "  request %2d/%d -> %s  router predicted %4d of %4d prompt tokens cached\n",
			i+1, o.BurstRequests, r.Endpoint, r.CachedTokens, r.PromptTokens)
	}
	engAfter, err := c.scrapeEngines(ctx)
	if err != nil {
		return res, err
	}
	gwAfter, err := Scrape(ctx, c.client, c.gw.URL())
	if err != nil {
		return res, err
	}

	fmt.Fprintf(w, "\n  %-21s %8s %8s %s\n", "engine", "routed", "served", "prefix-cache hit rate")
	for i, e := range c.engines {
		served := engAfter[i].Sum(metricSuccess) - engBefore[i].Sum(metricSuccess)
		hits := engAfter[i].Sum(metricHits) - engBefore[i].Sum(metricHits)
		queries := engAfter[i].Sum(metricQueries) - engBefore[i].Sum(metricQueries)
		rate := math.NaN()
		if queries > 0 {
			rate = hits / queries
		}
		res.Succeeded[e.id], res.HitRate[e.id] = served, rate
		if res.Top == "" || served > res.Succeeded[res.Top] {
			res.Top = e.id
		}
		fmt.Fprintf(w, "  %-21s %8d %8.0f %s\n", e.id, res.Routed[e.id], served, hitRate(hits, queries))
	}
	pred := gwAfter.Sum(metricPredicted) - gwBefore.Sum(metricPredicted)
	prompt := gwAfter.Sum(metricPrompt) - gwBefore.Sum(metricPrompt)
	if prompt > 0 {
		res.PredictedCachedShare = pred / prompt
	}
	fmt.Fprintf(w, "  router predicted cached share: %.0f / %.0f prompt tokens = %.1f%%\n", pred, prompt, 100*res.PredictedCachedShare)

	top := res.Succeeded[res.Top]
	if top < burstMinShare*float64(o.BurstRequests) || !(res.HitRate[res.Top] >= burstMinHitRate) {
		return res, fmt.Errorf("the burst was not served from one warm engine: %s served %.0f of %d requests with a %.1f%% hit rate (want >= %.0f%% of them at >= %.0f%%)",
			res.Top, top, o.BurstRequests, 100*res.HitRate[res.Top], 100*burstMinShare, 100*burstMinHitRate)
	}
	fmt.Fprintf(w, "  PASS: %s served %.0f of %d requests with a %.1f%% prefix-cache hit rate\n",
		res.Top, top, o.BurstRequests, 100*res.HitRate[res.Top])
	return res, nil
}

func hitRate(hits, queries float64) string {
	if queries == 0 {
		return "-"
	}
	return fmt.Sprintf("%5.1f%%  (%.0f / %.0f tokens)", 100*hits/queries, hits, queries)
}
