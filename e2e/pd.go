package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/disagg/sidecar"
	"github.com/kvroute/kvroute/simengine/server"
)

// PD policy names, the rows of the P/D step's table.
const (
	PDAggregated  = "aggregated"   // four engines serving whole requests, precise routing, no split
	PDAlwaysSplit = "always-split" // disagg with nonCachedTokens -1: every request split
	PDDecider     = "decider"      // disagg with its defaults (nonCachedTokens 1000)
)

// PDReport is what RunPD measured: one row per policy, in the order
// aggregated, always-split, decider.
type PDReport struct {
	Policies []PDPolicyResult
}

// PDKindCount counts one kind of request of the P/D workload: how many
// succeeded and how many of those the gateway split.
type PDKindCount struct{ Requests, Split int }

// PDPolicyResult is one row of the P/D step's table, all of it measured by
// the demo's client over streamed responses except the sidecar and engine
// counters.
type PDPolicyResult struct {
	Policy string
	// Requests is the workload's size; Succeeded the requests that
	// streamed to [DONE] with status 200.
	Requests, Succeeded int
	// Split is the succeeded requests the gateway split (the response
	// named a prefill endpoint in X-Kvroute-Prefill-Endpoint).
	Split int
	// FirstTurns, FollowUps and Documents break Split down by kind: a
	// chat's first turn, its later turns, one-off documents.
	FirstTurns, FollowUps, Documents PDKindCount
	// TTFTP50 and TTFTP90: client time to the first token chunk.
	TTFTP50, TTFTP90 time.Duration
	// ITLMean and ITLP99: client time between consecutive token chunks,
	// over every gap of every request.
	ITLMean, ITLP99 time.Duration
	// Exchanges and Fallbacks are the decode sidecars' completed two-step
	// exchanges and fallbacks to a local prefill
	// (kvroute_sidecar_requests_total{outcome="split|fallback"}).
	Exchanges, Fallbacks int
	// Transfers is the decode engines' KV reads from a prefiller
	// (simengine_kv_transfers_total, every outcome), TransferFailures those
	// that failed or came back short (simengine_kv_transfer_failures_total).
	Transfers, TransferFailures int
	// FirstError is the first failed request's error, if any.
	FirstError error
}

// SplitRate is Split / Succeeded (0 without successes).
func (r PDPolicyResult) SplitRate() float64 {
	if r.Succeeded == 0 {
		return 0
	}
	return float64(r.Split) / float64(r.Succeeded)
}

// pdPolicy is one policy of the P/D step: the engines' roles and the
// gateway's disagg block (nil: aggregated).
type pdPolicy struct {
	name  string
	roles []string
	dis   *disagg.Config
}

func pdPolicies() []pdPolicy {
	split := []string{server.RolePrefill, server.RolePrefill, server.RoleDecode, server.RoleDecode}
	return []pdPolicy{
		{PDAggregated, []string{server.RoleBoth, server.RoleBoth, server.RoleBoth, server.RoleBoth}, nil},
		{PDAlwaysSplit, split, &disagg.Config{NonCachedTokens: -1}},
		{PDDecider, split, &disagg.Config{}},
	}
}

// RunPD is the demo's P/D step (--pd): for each policy it starts four
// simulated engines (aggregated: four of role both behind a precise
// gateway; always-split and the decider: two prefill and two decode
// engines, a routing sidecar, package disagg/sidecar's Handler, in front of
// each decode engine, and a gateway whose disagg profile names the
// prefiller in x-prefiller-host-port), sends the same workload through the
// gateway (multi-turn chats sharing long system prompts, and one-off long
// documents, streamed, from 2 × Options.LoadConcurrency clients), stops
// everything it started, and prints a table: split rate, TTFT p50/p90 and
// inter-token time per policy. Every policy starts from empty caches. It
// returns an error when a request failed or a policy split other than
// it must (aggregated none, always-split all), after printing the table.
func RunPD(ctx context.Context, o Options, w io.Writer) (*PDReport, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	size := pdSizeFor(o)
	wl := newPDWorkload(o.Model, size)
	fmt.Fprintf(w, "kvroute demo, prefill/decode disaggregation: per policy 4 simulated vLLM engines (model %q, block size %d, %d KV blocks each) and a gateway, in this process\n",
		o.Model, o.BlockSize, max(o.EngineBlocks, pdEngineBlocks))
	fmt.Fprintf(w, "  workload: %d chats of %d turns over %d shared %d-token system prompts, and %d one-off %d-token documents:\n",
		size.chats, size.turns, size.systems, size.systemTokens, size.documents, size.docTokens)
	fmt.Fprintf(w, "            %d streamed chat requests of %d output tokens from %d clients, the same for every policy\n",
		wl.requests, size.maxTokens, size.clients)
	fmt.Fprintf(w, "  %-13s 4 engines of role both, precise routing\n", PDAggregated)
	fmt.Fprintf(w, "  %-13s 2 prefill + 2 decode engines, a sidecar before each decoder, disagg nonCachedTokens -1\n", PDAlwaysSplit)
	fmt.Fprintf(w, "  %-13s the same fleet, disagg defaults (split at %d uncached tokens on the decode endpoint)\n", PDDecider, disagg.DefaultNonCachedTokens)

	section(w, "P/D: aggregated serving vs always-split vs the decider")
	rep := &PDReport{}
	for _, pol := range pdPolicies() {
		fmt.Fprintf(w, "  %-13s %d requests ... ", pol.name, wl.requests)
		t0 := time.Now()
		res, err := runPDPolicy(ctx, o, pol, wl)
		if err != nil {
			fmt.Fprintln(w)
			return rep, fmt.Errorf("%s: %w", pol.name, err)
		}
		fmt.Fprintf(w, "done in %v; sidecars %d exchanges, %d fallbacks; decoders %d KV transfers, %d failed\n",
			time.Since(t0).Round(100*time.Millisecond), res.Exchanges, res.Fallbacks, res.Transfers, res.TransferFailures)
		rep.Policies = append(rep.Policies, res)
	}
	fmt.Fprintln(w)
	rep.WriteTable(w)
	err = rep.Check()
	if err != nil {
		fmt.Fprintf(w, "  FAIL: %v\n", err)
	} else {
		d := rep.Policies[2]
		fmt.Fprintf(w, "  PASS: every request succeeded; aggregated split none, always-split all, the decider %d of %d (%d of %d follow-up turns kept local)\n",
			d.Split, d.Succeeded, d.FollowUps.Requests-d.FollowUps.Split, d.FollowUps.Requests)
	}
	fmt.Fprintf(w, "\nDone in %v; every engine, sidecar and gateway of the step is stopped.\n", time.Since(start).Round(time.Second))
	return rep, err
}

// WriteTable prints the policies' table.
func (r *PDReport) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "  %-13s %8s %8s %7s %9s %9s %9s %9s  %s\n", "policy", "requests", "ok", "split", "TTFT p50", "TTFT p90", "ITL mean", "ITL p99", "split: first turns / follow-ups / documents")
	for _, p := range r.Policies {
		fmt.Fprintf(w, "  %-13s %8d %8d %6.1f%% %9s %9s %9s %9s  %d/%d %d/%d %d/%d\n", p.Policy, p.Requests, p.Succeeded, 100*p.SplitRate(),
			ms(p.TTFTP50), ms(p.TTFTP90), msFrac(p.ITLMean), msFrac(p.ITLP99),
			p.FirstTurns.Split, p.FirstTurns.Requests, p.FollowUps.Split, p.FollowUps.Requests, p.Documents.Split, p.Documents.Requests)
	}
}

// Check verifies what the step must show whatever the machine's speed:
// every request succeeded, aggregated serving split none, always-split
// all, the decider some but not all, and every split went through a
// sidecar's exchange (no fallback).
func (r *PDReport) Check() error {
	var errs []error
	for _, p := range r.Policies {
		if p.Succeeded != p.Requests {
			errs = append(errs, fmt.Errorf("%s: %d of %d requests failed (first: %v)", p.Policy, p.Requests-p.Succeeded, p.Requests, p.FirstError))
		}
		if p.Fallbacks != 0 || p.Exchanges != p.Split {
			errs = append(errs, fmt.Errorf("%s: the gateway split %d requests, the sidecars exchanged %d and fell back %d times", p.Policy, p.Split, p.Exchanges, p.Fallbacks))
		}
		switch {
		case p.Policy == PDAggregated && p.Split != 0:
			errs = append(errs, fmt.Errorf("%s split %d requests", p.Policy, p.Split))
		case p.Policy == PDAlwaysSplit && p.Split != p.Succeeded:
			errs = append(errs, fmt.Errorf("%s split only %d of %d requests", p.Policy, p.Split, p.Succeeded))
		case p.Policy == PDDecider && (p.Split == 0 || p.Split == p.Succeeded):
			errs = append(errs, fmt.Errorf("%s split %d of %d requests: neither some nor all", p.Policy, p.Split, p.Succeeded))
		}
	}
	if len(r.Policies) != 3 {
		errs = append(errs, fmt.Errorf("%d policies measured, want 3", len(r.Policies)))
	}
	return errors.Join(errs...)
}

// runPDPolicy starts pol's fleet, sends the workload through its gateway,
// reads the sidecars' and decoders' counters and stops the fleet.
func runPDPolicy(ctx context.Context, o Options, pol pdPolicy, wl *pdWorkload) (res PDPolicyResult, err error) {
	f, err := startPDFleet(ctx, o, pol.roles, pol.dis)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, f.close()) }()
	replies, failed, firstErr := pdRun(ctx, f.client, f.gw.URL(), wl, wl.clients)
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	res = PDPolicyResult{Policy: pol.name, Requests: wl.requests, Succeeded: len(replies), FirstError: firstErr}
	if failed+len(replies) != wl.requests {
		return res, fmt.Errorf("%d replies and %d failures for %d requests", len(replies), failed, wl.requests)
	}
	var ttfts, gaps []time.Duration
	var kinds [pdKinds]PDKindCount
	for _, r := range replies {
		ttfts = append(ttfts, r.ttft)
		gaps = append(gaps, r.gaps...)
		kinds[r.kind].Requests++
		if r.prefill != "" {
			res.Split++
			kinds[r.kind].Split++
		}
	}
	res.FirstTurns, res.FollowUps, res.Documents = kinds[pdFirstTurn], kinds[pdFollowUp], kinds[pdDocument]
	res.TTFTP50, res.TTFTP90 = percentile(ttfts, 0.5), percentile(ttfts, 0.9)
	res.ITLMean, res.ITLP99 = mean(gaps), percentile(gaps, 0.99)
	for _, c := range []struct {
		n       *int
		outcome string
	}{{&res.Exchanges, sidecar.OutcomeSplit}, {&res.Fallbacks, sidecar.OutcomeFallback}} {
		v, err := f.sidecarCounter("kvroute_sidecar_requests_total", "outcome", c.outcome)
		if err != nil {
			return res, err
		}
		*c.n = int(v)
	}
	for _, c := range []struct {
		n    *int
		name string
	}{{&res.Transfers, "simengine_kv_transfers_total"}, {&res.TransferFailures, "simengine_kv_transfer_failures_total"}} {
		v, err := f.decoderSum(ctx, c.name)
		if err != nil {
			return res, err
		}
		*c.n = int(v)
	}
	return res, nil
}

// mean is the arithmetic mean of ds (0 when empty).
func mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

// msFrac prints d in milliseconds with one decimal.
func msFrac(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}
