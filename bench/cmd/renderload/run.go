package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

// scenario is one render configuration under test.
type scenario struct {
	name string
	set  func(*render.Config)
}

// scenarios compares the render client as it was (every render sent at
// once, none hedged: each waits out the renderer's queue) with its
// defaults (a concurrency limit per endpoint, a queue bounded in time,
// hedging at the endpoint's recent p95), and the defaults without hedging.
var scenarios = []scenario{
	{"before (no limit, no hedge)", func(c *render.Config) { c.MaxConcurrency = new(0); c.Hedge = new(false) }},
	{"limit and queue, no hedge", func(c *render.Config) { c.Hedge = new(false) }},
	{"after (defaults)", func(*render.Config) {}},
}

// result is one scenario at one offered load.
type result struct {
	scenario  string
	load      float64       // offered load as a multiple of the renderers' capacity
	offered   float64       // offered requests/s
	requests  int           // requests sent
	wall      time.Duration // from the first arrival to the last decision
	tokenized int           // decisions made with the prompt's tokens
	p50, p99  time.Duration // time spent in Pick
	abandoned float64       // renders the renderers finished after their client had gone, by the end
	backlog   float64       // renders still waiting for a worker at the end
}

func (r result) routedPerSecond() float64    { return float64(r.requests) / r.wall.Seconds() }
func (r result) tokenizedPerSecond() float64 { return float64(r.tokenized) / r.wall.Seconds() }
func (r result) tokenizedShare() float64     { return float64(r.tokenized) / float64(r.requests) }

// prompt returns request i's completions body: about words words, unique
// per request (no cache reuse: the figure is whether the request could be
// tokenized at all).
func prompt(i, words int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"model":"%s","max_tokens":1,"prompt":"request %d`, model, i)
	for w := range words {
		fmt.Fprintf(&b, " w%d", (w*7919+i)%5000)
	}
	b.WriteString(`"}`)
	return []byte(b.String())
}

const model = "sim-model"

// runScenario offers load × the renderers' capacity in requests per second,
// on a fixed schedule, for o.duration, to a Router whose endpoints are the
// saturating simulated engines it renders on, and measures every Pick.
func runScenario(o options, sc scenario, load float64) (result, error) {
	tokens := len(simengine.Tokenize(nil, string(prompt(0, o.words))))
	cost := o.renderTime / time.Duration(tokens)
	var sims []*server.Server
	var regs []*prometheus.Registry
	defer func() {
		for _, s := range sims {
			_ = s.Close()
		}
	}()
	var eps []kvroute.Endpoint
	for range o.renderers {
		reg := prometheus.NewRegistry()
		s, err := server.New(server.Config{Model: model, EnableScaleOut: true, RenderWorkers: o.workers, RenderTokenCost: cost,
			MaxModelLen: 1 << 20}, server.Options{Registry: reg})
		if err != nil {
			return result{}, err
		}
		sims, regs = append(sims, s), append(regs, reg)
		if err := s.Start("127.0.0.1:0"); err != nil {
			return result{}, err
		}
		eps = append(eps, kvroute.Endpoint{ID: s.Addr()})
	}
	cfg := kvroute.DefaultConfig()
	cfg.Model = model
	cfg.Events.Enabled = new(false)
	sc.set(&cfg.Render)
	r, err := kvroute.New(context.Background(), cfg, kvroute.Options{})
	if err != nil {
		return result{}, err
	}
	defer r.Close()
	if err := r.SetEndpoints(eps); err != nil {
		return result{}, err
	}

	capacity := float64(o.renderers*o.workers) / o.renderTime.Seconds()
	rate := load * capacity
	n := int(rate * o.duration.Seconds())
	res := result{scenario: sc.name, load: load, offered: rate, requests: n}
	lat := make([]time.Duration, n)
	tokenized := make([]bool, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		time.Sleep(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
		body := prompt(i, o.words)
		wg.Go(func() {
			t0 := time.Now()
			d, err := r.Pick(context.Background(), &kvroute.Request{API: render.APICompletions, Body: body}, eps)
			lat[i] = time.Since(t0)
			if err == nil {
				tokenized[i] = d.RenderErr == nil
				d.Done(kvroute.DoneInfo{})
			}
		})
	}
	wg.Wait()
	res.wall = time.Since(start)
	for _, ok := range tokenized {
		if ok {
			res.tokenized++
		}
	}
	slices.Sort(lat)
	res.p50, res.p99 = lat[n/2], lat[n*99/100]
	for _, reg := range regs {
		res.abandoned += value(reg, "simengine_render_abandoned_total")
		res.backlog += value(reg, "simengine_render_queued")
	}
	return res, nil
}

// value reads an unlabelled counter or gauge from reg.
func value(reg *prometheus.Registry, name string) float64 {
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) == 0 {
			continue
		}
		m := mf.GetMetric()[0]
		if m.GetCounter() != nil {
			return m.GetCounter().GetValue()
		}
		return m.GetGauge().GetValue()
	}
	return 0
}
