package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kvroute/kvroute"
	kvaccuracy "github.com/kvroute/kvroute/accuracy"
	"github.com/kvroute/kvroute/checkpoint"
	"github.com/kvroute/kvroute/gateway"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/simengine/server"
	"github.com/kvroute/kvroute/telemetry"
)

// AccuracyResult is the accuracy step: the closed loop comparing the
// router's predicted cached tokens with the engines' reported cached_tokens,
// on a healthy fleet, while one engine's KV events are suppressed, and once
// they flow again. Readings are the gateway's /metrics, per phase.
type AccuracyResult struct {
	// Engine is the engine whose KV events were suppressed.
	Engine string
	// Healthy, Fault and Recovered are the three phases' readings.
	Healthy, Fault, Recovered AccuracyReading
	// Resyncs is the number of replays the loop asked for on Engine.
	Resyncs float64
}

// AccuracyReading is what the gateway's metrics said of one phase: the
// observed requests (increase over the phase), those predicted exactly,
// those where the engine reused more than predicted (missing index
// entries) or less (stale ones), and whether Engine was marked inaccurate
// at the phase's end.
type AccuracyReading struct {
	Observed, Exact, Missing, Stale float64
	Inaccurate                      bool
}

// Metric names of the accuracy loop read by the step.
const (
	metricObserved   = "kvroute_router_prediction_observed_total"
	metricMissing    = "kvroute_router_prediction_missing_total"
	metricStale      = "kvroute_router_prediction_stale_total"
	metricError      = "kvroute_router_prediction_error_tokens"
	metricInaccurate = "kvroute_router_endpoint_inaccurate"
	metricResyncs    = "kvroute_router_accuracy_resyncs_total"
)

// accuracyGateway is the step's own precise gateway: the cluster's
// configuration with the engines' cached_tokens observed, the loop's
// window short enough for a demo (4 requests, 40 % misses) with resync on,
// and no speculative entries, so that only the engines' events tell the
// index anything. It has its own event subscriptions, and earlier steps'
// load (where concurrent requests legitimately race the events) never
// reaches its loop.
func accuracyGateway(ctx context.Context, c *cluster) (*gateway.Server, error) {
	cfg := c.gwCfg
	cfg.Listen = "127.0.0.1:0" // beside the precise gateway, not on its port
	cfg.Router.Checkpoint = checkpoint.Config{}
	cfg.Router.Speculative.Enabled = new(false)
	cfg.Router.Accuracy = kvaccuracy.Config{Window: 4, MissRatio: 0.4, Resync: true}
	cfg.Proxy = gateway.Config{Model: c.model, ObserveCachedTokens: true}
	cfg.Endpoints = c.endpoints()
	return gateway.NewServer(ctx, cfg, gateway.Options{Set: telemetry.Set{Logger: c.log}})
}

// accuracy runs the step; see AccuracyResult.
func accuracy(ctx context.Context, c *cluster, o Options, w io.Writer) (res AccuracyResult, err error) {
	g, err := accuracyGateway(ctx, c)
	if err != nil {
		return res, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = errors.Join(err, g.Shutdown(sctx))
	}()
	fmt.Fprintf(w, "  gateway  %s  (this step's own: precise, observing the engines' cached_tokens, accuracy window 4, resync on; stopped after it)\n", g.URL())
	r := g.Router()
	if err := awaitAccuracy(ctx, 10*time.Second, "the streams to be live", r.Ready); err != nil {
		return res, err
	}
	a := &accuracyRun{ctx: ctx, c: c, g: g, o: o}

	// 1. Healthy: every prompt twice, the second time once the index has
	// its blocks: the engine reuses exactly what was predicted.
	before, err := a.scrape()
	if err != nil {
		return res, err
	}
	var shared string
	for i := range 3 {
		p := document(uint64(9000+i), 6*o.BlockSize)
		first, err := a.pair(p)
		if err != nil {
			return res, err
		}
		if i == 0 {
			res.Engine, shared = first.Endpoint, p
		}
	}
	after, err := a.scrape()
	if err != nil {
		return res, err
	}
	res.Healthy = reading(before, after, res.Engine)
	fmt.Fprintf(w, "  healthy fleet: %s observed, %s predicted exactly, %s missing, %s stale\n",
		count(res.Healthy.Observed), count(res.Healthy.Exact), count(res.Healthy.Missing), count(res.Healthy.Stale))

	// 2. Fault: the engine that holds the shared prompt stops publishing KV
	// events, without a sequence gap. Prompts extending the shared one go
	// to it (the index knows the shared blocks there); the engine caches
	// their new blocks, the index never hears of them, and asking again
	// reuses more than predicted.
	url := "http://" + res.Engine + server.SuppressKVEventsPath
	if err := post(ctx, c.client, url+"?on=true"); err != nil {
		return res, err
	}
	fmt.Fprintf(w, "  POST %s?on=true: engine %s publishes no KV events from now on\n", server.SuppressKVEventsPath, res.Engine)
	before = after
	for i := range 4 {
		p := shared + " " + document(uint64(9100+i), 2*o.BlockSize)
		if _, err := a.send(p); err != nil {
			return res, err
		}
		if _, err := a.send(p); err != nil {
			return res, err
		}
	}
	if err := awaitAccuracy(ctx, 10*time.Second, "the loop to mark "+res.Engine+" inaccurate", func() bool {
		return r.EndpointInaccurate(res.Engine)
	}); err != nil {
		return res, err
	}
	if after, err = a.scrape(); err != nil {
		return res, err
	}
	res.Fault = reading(before, after, res.Engine)
	res.Resyncs = after.Get(metricResyncs, "endpoint", res.Engine, "result", "requested")
	fmt.Fprintf(w, "  suppressed: %s observed, %s with missing entries (the engine reused more than predicted); %s=%v for %s, %s resync requested\n",
		count(res.Fault.Observed), count(res.Fault.Missing), metricInaccurate, boolNum(res.Fault.Inaccurate), res.Engine, count(res.Resyncs))

	// 3. Recovery: events flow again; the resync replayed the engine's
	// buffer, and new prompts are predicted exactly until the window is
	// clean and the endpoint accurate again.
	if err := post(ctx, c.client, url+"?on=false"); err != nil {
		return res, err
	}
	if err := awaitAccuracy(ctx, 10*time.Second, "the resynced stream to be live", func() bool {
		st, ok := r.Events().Status(res.Engine)
		return ok && st.State == "live"
	}); err != nil {
		return res, err
	}
	fmt.Fprintf(w, "  POST %s?on=false: events flow again\n", server.SuppressKVEventsPath)
	before = after
	for i := 0; r.EndpointInaccurate(res.Engine); i++ {
		if i == 12 {
			return res, fmt.Errorf("accuracy: %s still inaccurate after %d healthy requests", res.Engine, 2*i)
		}
		if _, err := a.pair(shared + " " + document(uint64(9200+i), 2*o.BlockSize)); err != nil {
			return res, err
		}
	}
	if after, err = a.scrape(); err != nil {
		return res, err
	}
	res.Recovered = reading(before, after, res.Engine)
	fmt.Fprintf(w, "  recovered: %s observed, %s predicted exactly, %s missing; %s=%v for %s\n",
		count(res.Recovered.Observed), count(res.Recovered.Exact), count(res.Recovered.Missing), metricInaccurate, boolNum(res.Recovered.Inaccurate), res.Engine)
	return res, nil
}

// accuracyRun sends the step's requests through its gateway.
type accuracyRun struct {
	ctx      context.Context
	c        *cluster
	g        *gateway.Server
	o        Options
	observed float64 // requests sent whose observation is awaited
}

// send sends one completion and waits until the gateway has observed the
// engine's cached tokens for it.
func (a *accuracyRun) send(prompt string) (reply, error) {
	rep, err := send(a.ctx, a.c.client, a.g.URL()+"/v1/completions", map[string]any{"model": a.c.model, "prompt": prompt, "max_tokens": 2})
	if err != nil {
		return rep, err
	}
	if rep.Status != 200 {
		return rep, fmt.Errorf("accuracy: completion: status %d: %s", rep.Status, rep.Body)
	}
	a.observed++
	err = awaitAccuracy(a.ctx, 10*time.Second, "the gateway to observe the engine's cached tokens", func() bool {
		m, err := a.scrape()
		return err == nil && m.Sum(metricObserved) >= a.observed
	})
	return rep, err
}

// pair sends prompt, waits until the index predicts more than the first
// answer did (its own blocks arrived as events), and sends it again.
func (a *accuracyRun) pair(prompt string) (reply, error) {
	first, err := a.send(prompt)
	if err != nil {
		return first, err
	}
	body := []byte(fmt.Sprintf(`{"model":%q,"prompt":%q}`, a.c.model, prompt))
	eps := a.c.endpoints()
	if err := awaitAccuracy(a.ctx, 10*time.Second, "the prompt's KV events to reach the index", func() bool {
		d, err := a.g.Router().Pick(a.ctx, &kvroute.Request{API: render.APICompletions, Body: body}, eps)
		if err != nil {
			return false
		}
		d.Done(kvroute.DoneInfo{})
		return d.CachedTokens > first.CachedTokens
	}); err != nil {
		return first, err
	}
	_, err = a.send(prompt)
	return first, err
}

func (a *accuracyRun) scrape() (Metrics, error) { return Scrape(a.ctx, a.c.client, a.g.URL()) }

// reading is the increase of the loop's counters between two scrapes and
// the endpoint's inaccurate gauge in the second.
func reading(before, after Metrics, endpoint string) AccuracyReading {
	exact := func(m Metrics) float64 {
		// Errors are whole tokens: the (-1, 0] bucket holds exactly 0.
		return m.Get(metricError+"_bucket", "le", "0") - m.Get(metricError+"_bucket", "le", "-1")
	}
	return AccuracyReading{
		Observed:   after.Sum(metricObserved) - before.Sum(metricObserved),
		Exact:      exact(after) - exact(before),
		Missing:    after.Sum(metricMissing) - before.Sum(metricMissing),
		Stale:      after.Sum(metricStale) - before.Sum(metricStale),
		Inaccurate: after.Get(metricInaccurate, "endpoint", endpoint) == 1,
	}
}

// awaitAccuracy polls cond every 10 ms until it holds, ctx ends or limit passes.
func awaitAccuracy(ctx context.Context, limit time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("accuracy: timed out after %v waiting for %s", limit, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

func count(v float64) string { return strings.TrimSuffix(fmt.Sprintf("%.0f", v), ".0") }

func boolNum(b bool) int {
	if b {
		return 1
	}
	return 0
}
