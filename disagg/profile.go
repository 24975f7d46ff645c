package disagg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
)

// Options are the Profile's dependencies.
type Options struct {
	// Set: Registerer receives the metrics (nil registers none), Logger the
	// logs (nil discards them).
	telemetry.Set
	// EventsLive reports whether an endpoint's KV-event stream is live (a
	// Router's Events().Status(id).State == kvevents.StateLive, or its
	// Readiness). A decision whose decode endpoint's stream is not live is
	// made on what the index knows of it (the router's own speculative
	// entries, events from before) and counted in
	// kvroute_disagg_decode_without_events_total. Nil takes every stream as
	// live. It may be set after New with SetEventsLive, since the Router it
	// asks is built with the Profile.
	EventsLive func(endpointID string) bool
	// DecodeScorers are added to the decode pick's score, each clamped to
	// [0, 1] and weighted, as kvroute.Options.Scorers are to the router's
	// one-role pick, which the decode pick replaces. A host passes here the
	// scorers that rate where a request should decode: session affinity's
	// (session.Affinity.Scorer), so that a conversation's next turn stays
	// on the decode endpoint that holds it, and LoRA's. The prefill pick is
	// the router's own score stage and runs kvroute.Options.Scorers.
	DecodeScorers []kvroute.WeightedScorer
}

// Profile is the prefill/decode profile, a kvroute.Profile (pass it as
// kvroute.Options.Profile): it picks each request's decode endpoint, decides
// from that endpoint's cached prefix whether to disaggregate, and if so
// picks a prefill endpoint. It is safe for concurrent use.
type Profile struct {
	cfg     Config
	set     telemetry.Set
	met     *metrics
	scorers []kvroute.WeightedScorer // Options.DecodeScorers; read-only after New
	live    sync.Map                 // "fn" → func(string) bool; read on every pick
	bufs    sync.Pool
	// out is the decode endpoints' in-flight output tokens and requests,
	// charged at the pick and released when the request ends.
	out     *tokenload.Tracker
	pruneMu sync.Mutex // one prune at a time
	// pruneKept is how many counters out kept at the last prune: the
	// next one waits until it holds twice as many (see pruneOutput).
	pruneKept atomic.Int64
}

// stager is what the Profile needs of the stages a Router passes it (see
// kvroute.Profile).
type stager interface {
	Match(ctx context.Context, req *kvroute.Request, endpoints []kvroute.Endpoint) (*kvroute.Selection, error)
	Prompts(s *kvroute.Selection) ([]render.Prompt, string)
}

// ErrNoDecodeEndpoint is returned by Pick when no candidate may decode
// (every one has RolePrefill); it wraps kvroute.ErrNoEndpoints.
var ErrNoDecodeEndpoint = fmt.Errorf("%w: none may decode (every candidate has role %q)", kvroute.ErrNoEndpoints, RolePrefill)

// errStages is Pick's error when the stages are not a Router's.
var errStages = errors.New("disagg: the profile's stages must be a kvroute.Router's (they lack Match and Prompts)")

// New validates cfg and builds a Profile with its defaults filled in.
func New(cfg Config, opts Options) (*Profile, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.SplitAPIs = slices.Clone(cfg.SplitAPIs) // the caller's slice stays the caller's
	p := &Profile{cfg: cfg.WithDefaults(), set: opts.Set, met: newMetrics(), out: newOutputTracker(),
		scorers: slices.Clone(opts.DecodeScorers)}
	p.bufs.New = func() any { return new(roleBufs) }
	if opts.EventsLive != nil {
		p.SetEventsLive(opts.EventsLive)
	}
	if err := opts.Register(p.met.collectors()...); err != nil {
		return nil, fmt.Errorf("disagg: metrics: %w", err)
	}
	return p, nil
}

// Close unregisters the Profile's metrics. The Profile holds no goroutine.
func (p *Profile) Close() { p.set.Unregister(p.met.collectors()...) }

// Config returns the configuration with its defaults filled in.
func (p *Profile) Config() Config {
	c := p.cfg
	c.SplitAPIs = slices.Clone(c.SplitAPIs) // the Profile's own stays unchanged
	return c
}

// SetEventsLive sets Options.EventsLive (nil: every stream is live).
func (p *Profile) SetEventsLive(fn func(endpointID string) bool) {
	if fn == nil {
		p.live.Delete("fn")
		return
	}
	p.live.Store("fn", fn)
}

func (p *Profile) eventsLive(id string) bool {
	fn, ok := p.live.Load("fn")
	return !ok || fn.(func(string) bool)(id)
}

// roleBufs are one pick's candidate lists per role, pooled.
type roleBufs struct{ dec, pre []kvroute.Endpoint }

// Pick is the profile step (see the package documentation): the decode
// pick among the candidates that may decode, the decider, and, when it
// splits, the prefill pick among the others that may prefill. The Decision
// is the decode endpoint's, with the prefill endpoint's in Roles when the
// request is split; its FirstChunk and Done release both, and so does the
// router's request table if it drops the request, even while Pick runs
// (the router applies the drop when Pick returns, Roles set). req.Body is
// read as UTF-8 JSON (its max_tokens, a Messages request's tool_choice), as
// kvroute's gateway and kvroute-epp hand it over: a UTF-16 or UTF-32
// client body already decoded, as vLLM decodes it.
func (p *Profile) Pick(ctx context.Context, req *kvroute.Request, endpoints []kvroute.Endpoint, stages kvroute.Picker) (*kvroute.Decision, error) {
	st, ok := stages.(stager)
	if !ok {
		return nil, errStages
	}
	b := p.bufs.Get().(*roleBufs)
	defer p.putBufs(b)
	for _, e := range endpoints {
		if Decodes(e) {
			b.dec = append(b.dec, e)
		}
	}
	if len(b.dec) == 0 {
		return nil, ErrNoDecodeEndpoint
	}
	p.pruneOutput(endpoints)
	out := p.outputTokens(req)

	dreq := *req
	ds, err := st.Match(ctx, &dreq, b.dec)
	if err != nil {
		return nil, err
	}
	defer ds.Release() // last: the prefill pick reads its prompts
	di := p.decodePick(ds, st)
	if di < 0 {
		return nil, fmt.Errorf("%w: the filters kept no decode endpoint", kvroute.ErrNoEndpoints)
	}
	dc := ds.Candidate(di)
	if !p.eventsLive(dc.Endpoint.ID) {
		p.met.withoutEvents.Inc()
	}
	if !p.cfg.SplitsAPI(req.API) {
		// Not an API the sidecar splits (Config.SplitAPIs): it would pass it
		// to the decoder unsplit, and a prefill endpoint picked for it
		// would be charged a prompt it never gets.
		return p.local(ds, di, reasonAPI, out)
	}
	if req.API == render.APIMessages && forcesNamedTool(req.Body) {
		// vLLM answers its one-token prefill with an error (forcesNamedTool):
		// a prefill endpoint would be charged, and the decode endpoint would
		// prefill it anyway.
		return p.local(ds, di, reasonForcedTool, out)
	}
	prompts, salt := st.Prompts(ds)
	reason := p.decide(dc.UncachedTokens, promptTokens(prompts))
	// below: the threshold keeps it local unless the cost rule's extension
	// below the threshold (BelowThresholdStallWeight) finds splitting faster.
	below := reason == reasonCached && p.cfg.CostRule && p.cfg.BelowThresholdStallWeight >= 0
	if reason != reasonUncached && !below {
		return p.local(ds, di, reason, out)
	}
	noPrefill := reasonNoPrefill
	if below {
		noPrefill = reasonCached // nothing to split to: it stays local as the threshold says
	}
	for _, e := range endpoints {
		if Prefills(e) && e.ID != dc.Endpoint.ID {
			b.pre = append(b.pre, e)
		}
	}
	if len(b.pre) == 0 {
		return p.local(ds, di, noPrefill, out)
	}
	preq := kvroute.Request{API: req.API, Header: req.Header, Model: req.Model, LoRA: req.LoRA,
		CacheSalt: salt, Prompts: prompts, PrefillOnly: true}
	ps, err := st.Match(ctx, &preq, b.pre)
	if err != nil {
		return nil, err // the caller is gone: nothing was committed
	}
	defer ps.Release()
	pi, _ := ps.Score() // prefix cache and prefill load: the router's own filters and scorers
	if pi < 0 {
		return p.local(ds, di, noPrefill, out)
	}
	pc := ps.Candidate(pi)
	if max := p.cfg.MaxPrefillQueueTokens; max > 0 && pc.InFlightTokens >= max {
		return p.local(ds, di, reasonPrefillBusy, out)
	}
	est := Estimate{
		DecodeQueued: dc.InFlightTokens, DecodeUncached: dc.UncachedTokens, DecodeOpen: dc.OpenRequests,
		PrefillQueued: pc.InFlightTokens, PrefillUncached: pc.UncachedTokens,
	}
	switch {
	case below && !p.cfg.SplitCheaperBelowThreshold(est):
		return p.local(ds, di, reasonCached, out)
	case below:
		reason = reasonDecodeBusy
	case p.cfg.CostRule && !p.cfg.SplitCheaper(est):
		return p.local(ds, di, reasonLocalFaster, out)
	}
	dreq.RemotePrefill = true // read by Commit: the decode endpoint computes none of the prompt
	d, err := ds.Commit(di)
	if err != nil {
		return nil, err
	}
	pd, err := ps.Commit(pi)
	if err != nil {
		d.Done(kvroute.DoneInfo{Err: err})
		return nil, err
	}
	d.Roles = append(d.Roles, pd) // before Pick returns d, so whatever ends the request ends pd too (kvroute.Profile)
	p.chargeOutput(d, out)
	p.met.decisions[reason].Inc()
	p.met.pickDecode.Inc()
	p.met.pickPrefill.Inc()
	return d, nil
}

// local commits the decode pick alone: the decode endpoint prefills, and
// generates out output tokens.
func (p *Profile) local(ds *kvroute.Selection, di, reason int, out int64) (*kvroute.Decision, error) {
	d, err := ds.Commit(di)
	if err != nil {
		return nil, err
	}
	p.chargeOutput(d, out)
	p.met.decisions[reason].Inc()
	p.met.pickDecode.Inc()
	return d, nil
}

func (p *Profile) putBufs(b *roleBufs) {
	clear(b.dec)
	clear(b.pre)
	b.dec, b.pre = b.dec[:0], b.pre[:0]
	p.bufs.Put(b)
}

// promptTokens is the request's prompt length: its prompts' tokens summed.
func promptTokens(ps []render.Prompt) int64 {
	var n int64
	for i := range ps {
		n += int64(len(ps[i].TokenIDs))
	}
	return n
}

// RouterEventsLive returns the Options.EventsLive of r: an endpoint's
// KV-event stream counts as live when r's event pool has it in
// kvevents.StateLive or StateReplaying (catching up on what it published);
// not subscribed, still connecting, or degraded (the index may be stale),
// it does not. With events off none does.
func RouterEventsLive(r *kvroute.Router) func(endpointID string) bool {
	return func(id string) bool {
		ev := r.Events()
		if ev == nil {
			return false // events off: the index knows only the router's own speculation
		}
		st, ok := ev.Status(id)
		return ok && (st.State == kvevents.StateLive || st.State == kvevents.StateReplaying)
	}
}
