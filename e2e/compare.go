package e2e

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kvroute/kvroute/gateway"
)

// compare runs the same shared-prefix load through precise routing and
// through round-robin, with empty prefix caches each time, and prints the
// engines' hit rate and the client's time to first token for both.
func compare(ctx context.Context, c *cluster, o Options, w io.Writer) ([]PolicyResult, error) {
	systems := make([]string, o.LoadGroups)
	for g := range systems {
		systems[g] = document(uint64(100+g), o.PrefixTokens)
	}
	// The same request sequence for both policies.
	rng := rand.New(rand.NewPCG(7, 7))
	groups := make([]int, o.LoadRequests)
	for i := range groups {
		groups[i] = rng.IntN(o.LoadGroups)
	}
	var out []PolicyResult
	for _, run := range []struct {
		name string
		gw   *gateway.Server
	}{{"precise", c.gw}, {"round-robin", c.rr}} {
		if err := c.resetCaches(ctx); err != nil {
			return out, err
		}
		fmt.Fprintf(w, "  %-11s %d requests, %d clients ... ", run.name, o.LoadRequests, o.LoadConcurrency)
		start := time.Now()
		res, err := load(ctx, c, run.gw.URL(), systems, groups, o.LoadConcurrency, w)
		if err != nil {
			fmt.Fprintln(w)
			return out, fmt.Errorf("%s load: %w", run.name, err)
		}
		res.Policy = run.name
		fmt.Fprintf(w, "done in %v\n", time.Since(start).Round(100*time.Millisecond))
		out = append(out, res)
	}

	fmt.Fprintf(w, "\n  %-12s %9s %10s %10s  %s\n", "policy", "hit rate", "TTFT p50", "TTFT p90", "requests per engine")
	for _, r := range out {
		var split []string
		for _, e := range c.engines {
			split = append(split, fmt.Sprint(r.Routed[e.id]))
		}
		fmt.Fprintf(w, "  %-12s %8.1f%% %10s %10s  %s\n", r.Policy, 100*r.HitRate,
			ms(r.TTFTP50), ms(r.TTFTP90), strings.Join(split, " / "))
	}
	return out, nil
}

// load sends one chat request per entry of groups (the index of its shared
// system prompt), from conc concurrent clients, streaming, and measures the
// engines' hit rate over the run and the client's TTFT.
// load sends one chat request per group through gw with conc clients and
// prints how many are done at every quarter to progress.
func load(ctx context.Context, c *cluster, gw string, systems []string, groups []int, conc int, progress io.Writer) (PolicyResult, error) {
	res := PolicyResult{Requests: len(groups), Routed: map[string]int{}}
	before, err := c.scrapeEngines(ctx)
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		ttfts []time.Duration
		first error
		next  int
		done  int
		wg    sync.WaitGroup
	)
	quarter := max(1, len(groups)/4)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(groups) || ctx.Err() != nil {
					return
				}
				r, err := send(ctx, c.client, gw+"/v1/chat/completions",
					chatBody(c.model, systems[groups[i]], question(1000+i), 16, true))
				mu.Lock()
				if err != nil {
					if first == nil {
						first = err
					}
					cancel()
				} else {
					ttfts = append(ttfts, r.TTFT)
					res.Routed[r.Endpoint]++
					if done++; done%quarter == 0 && done < len(groups) {
						fmt.Fprintf(progress, "%d ", done)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return res, first
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
	if queries > 0 {
		res.HitRate = hits / queries
	}
	res.TTFTP50, res.TTFTP90 = percentile(ttfts, 0.5), percentile(ttfts, 0.9)
	return res, nil
}

// percentile returns the q-quantile of ds (nearest rank).
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}
