package kvroute

import (
	"errors"
	"sync/atomic"

	"github.com/kvroute/kvroute/accuracy"
	"github.com/kvroute/kvroute/affinity"
	"github.com/kvroute/kvroute/approx"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/tokenload"
)

// Decision is the router's answer for one request: where to send it, what the
// router predicted, and the request's lifecycle, which the gateway drives so
// that the in-flight load accounting stays exact and the index's predictions
// are checked against the engine.
//
// The lifecycle is two calls. FirstChunk, when the first bytes of the
// response arrive, releases the request's prompt tokens from the endpoint's
// committed load (the engine has finished the prefill). Done, when the
// response ends, fails or is aborted, ends the request: it releases whatever
// the request still holds (all of it when no first chunk came), unfiles its
// Request.ID and, when DoneInfo carries the engine's cached tokens, hands
// them with the prediction to the router's accuracy loop. One Done ends the
// request: the first call counts, later ones (and their DoneInfo) change
// nothing, so a gateway may both call Done where it learns the outcome and
// defer one as a safety net. Both methods are idempotent, safe to call from
// any goroutine and on a nil Decision. A gateway that retried the request
// on one of Fallbacks says so first, with Served: the accounting follows
// the endpoint that served.
//
// Ownership: the goroutine that received the Decision owns its fields (read
// them, do not change them while Done may run); FirstChunk and Done may come
// from any goroutine, concurrently with each other, with the router's
// request table and with Router.SetEndpoints. A Decision committed with a
// Request.ID is also held by the router's bounded request table
// (Config.Requests): a host with only the ID finds it with
// Router.Decision, and a request whose Done never comes is ended by the
// table when it expires or is evicted (its load released and its prediction
// ended without an engine report), so a lost request costs at most the
// table's bound. Both wait for Pick to return the Decision: while its
// Profile is still picking the other roles, Router.Decision does not find
// it, and a drop by the table (or a FirstChunk or Done through
// Router.Requests) is applied, to every role, when Pick returns it.
type Decision struct {
	// Endpoint is the chosen endpoint.
	Endpoint Endpoint
	// PromptTokens is the number of prompt tokens (summed over prompts); 0
	// when rendering failed.
	PromptTokens int
	// CachedTokens is the number of prompt tokens the index predicts the
	// chosen endpoint holds: contiguous cached blocks × block size.
	CachedTokens int
	// UncachedTokens is the load the request added to the endpoint: the
	// prompt tokens the endpoint is expected to compute.
	UncachedTokens int64
	// UsedCache reports whether cache information took part in the decision:
	// the request was tokenized and at least one candidate held part of it.
	UsedCache bool
	// Outcome is the affinity filter's decision (sticky, no_match,
	// load_override, ...); not_applicable when the Selection was committed
	// without running Filter.
	Outcome affinity.Outcome
	// RenderErr is the render failure when the request could not be
	// tokenized, or keyed as the engine keys it (prompt_embeds, a given
	// prompt of raw media: render.Prompt.RawMedia); the decision was then
	// made by load alone.
	RenderErr error
	// Score is the chosen endpoint's total score (0 when it was not scored).
	Score float64
	// Roles are the request's picks in its other roles, when the Router's
	// Profile picks it in several (a prefill endpoint beside this decode
	// one); FirstChunk and Done release them with this one. Nil for the
	// default single-role profile. The Profile appends them before it
	// returns the Decision from Pick, and nothing changes them after: until
	// then no one else reaches a Decision filed under a Request.ID (see
	// above), so whatever ends the request releases every role, once.
	Roles []*Decision
	// Fallbacks are the next best candidates after Endpoint, best first,
	// when the Request asked for them (Request.Fallbacks; at most that
	// many, fewer when the request had fewer other candidates). Those the
	// filters kept come first, by their total Score, then those only the
	// affinity filter dropped (Kept false, Score what the scorers give
	// them). A gateway tries them in order when Endpoint fails and reports
	// the one that served with Served. Nil when none were asked for or the
	// Selection was committed without scoring.
	Fallbacks []Candidate
	// Prompts are the request's prompts as the router tokenized them (or
	// as Request.Prompts gave them), when Request.KeepPrompts asked for
	// them and the request was tokenized; nil otherwise. The Decision owns
	// them until Release, which hands rendered ones back to the router.
	Prompts []render.Prompt
	// CacheSalt is the cache salt the block keys were computed with, set
	// with Prompts.
	CacheSalt string
	// CacheMode is where the cache information about Endpoint came from:
	// precise (its KV-event stream is live), approximate (the router's own
	// earlier decisions, Options.Approximate) or blind (neither, or the
	// request had no block keys). Counted in
	// kvroute_router_decision_mode_total{mode}. Live means the Router's own
	// KV-event subscription is live: with Config.Events disabled no
	// endpoint is, so an embedder that stores events into Index itself sees
	// blind (or approximate) here even when UsedCache is true.
	CacheMode approx.Mode

	inflight tokenload.Inflight
	moved    movedState              // the fallback that served, after Served
	first    atomic.Bool             // FirstChunk came
	table    *tokenload.RequestTable // where the request is filed under id; nil without an ID
	id       string
	acc      *accuracy.Loop // the router's closed loop, when the decision carries a prediction
	ended    atomic.Bool
	r        *Router     // whose pool Release returns it to; nil once released
	released atomic.Bool // Release came
	// prefillOnly: the endpoint only prefills (Request.PrefillOnly), so the
	// first chunk ends its part whole.
	prefillOnly bool
	// ownsPrompts: Prompts were rendered by the router (not given), so
	// Release may hand their arrays on.
	ownsPrompts bool
	// spare is a released Decision's rendered prompts, kept with it in the
	// router's pool for the next Pick that keeps prompts to render into
	// (Selection.keepPrompts); nil when there are none.
	spare []render.Prompt
	atEnd atomic.Pointer[func()] // AtEnd's function, taken by whichever of end and AtEnd runs it
	// pick holds what the request table did to the Decision while Pick's
	// Profile still built it (pickBuilding: it may add Roles until it
	// returns the Decision), for handOver to do when Pick returns it.
	pick atomic.Uint32
}

// Bits of Decision.pick.
const (
	pickBuilding   uint32 = 1 << iota // filed, and Pick's Profile has not returned it yet
	pickDropped                       // meanwhile the request table ended it
	pickFirstChunk                    // meanwhile the request table had its first chunk
)

// DoneInfo is what the gateway knows when a request ends.
type DoneInfo struct {
	// Err is the request's failure, nil on success. It is accepted for
	// symmetry with gateways' error paths and is not otherwise interpreted.
	Err error
	// CachedTokens is the number of prompt tokens the engine reports having
	// served from its prefix cache for the request (vLLM:
	// usage.prompt_tokens_details.cached_tokens of the response, or of the
	// final usage chunk of a stream; vLLM leaves the field out when it
	// reused nothing, which is 0). It counts only with HasCachedTokens; a
	// negative count, or one above the prompt's tokens, is not observed,
	// only counted (kvroute_router_prediction_invalid_total).
	CachedTokens int
	// HasCachedTokens reports that the engine reported CachedTokens; false
	// (the zero value) means it did not, and the accuracy loop is not fed.
	HasCachedTokens bool
}

// errDropped is the DoneInfo.Err of a request the request table ended.
var errDropped = errors.New("kvroute: request dropped by the request table without its Done")

// FirstChunk records that the first response chunk arrived: the endpoint has
// finished the request's prefill, so its prompt tokens leave the committed
// load.
func (d *Decision) FirstChunk() {
	if d == nil {
		return
	}
	d.first.Store(true)
	d.inflight.FirstChunk()
	if d.prefillOnly {
		d.inflight.Done() // its one token came back: the prefiller is done
	}
	if m := d.moved.p.Load(); m != nil {
		m.firstChunk(d.prefillOnly)
	}
	for _, o := range d.Roles {
		o.FirstChunk()
	}
}

// Done ends the request, successful or not (see the lifecycle above):
// anything the request still held is released, its ID, if any, leaves the
// router's request table, and, with info.HasCachedTokens, the router
// compares its prediction with the engine's answer: it exports, per
// endpoint, the error (kvroute_router_prediction_error_tokens), the stale
// and missing counts, and whether the misses persist
// (kvroute_router_endpoint_inaccurate, with a log line and, with
// Config.Accuracy.Resync, a replay of the endpoint's events). It returns
// that comparison and true when this call ended the request with the
// engine's cached tokens and the decision carried a prediction (the request
// was rendered, and is not the decode pick of a split request,
// Request.RemotePrefill, whose engine reports the prompt it read from the
// prefiller as cached); otherwise ok is false. Later calls do nothing.
func (d *Decision) Done(info DoneInfo) (o accuracy.Observation, ok bool) {
	if d == nil {
		return accuracy.Observation{}, false
	}
	return d.end(info, true)
}

// end ends the request once; unfile is false when the request table ended
// it (it has unfiled the entry already, and holds its lock).
func (d *Decision) end(info DoneInfo, unfile bool) (accuracy.Observation, bool) {
	// Before reading moved: see Served. A decision already ended (Release
	// after Done) is seen with a load: the swap would fail, at a locked
	// instruction's cost.
	first := !d.ended.Load() && d.ended.CompareAndSwap(false, true)
	d.inflight.Done()
	if m := d.moved.p.Load(); m != nil {
		m.inflight.Done()
	}
	if !first {
		return accuracy.Observation{}, false
	}
	d.runAtEnd()
	for _, o := range d.Roles {
		o.Done(DoneInfo{Err: info.Err}) // the engine's cached tokens are this endpoint's
	}
	if unfile && d.table != nil {
		d.table.Forget(d.id, tableHandle{d})
	}
	if d.acc == nil {
		return accuracy.Observation{}, false
	}
	ep, cached := d.servedBy()
	p := accuracy.Prediction{Endpoint: ep, PromptTokens: d.PromptTokens, CachedTokens: cached}
	return d.acc.End(p, info.CachedTokens, info.HasCachedTokens)
}

// AtEnd registers fn to run once when the request ends: at its first
// Done, when the request table drops it, or at Release without a Done; at
// once when it has ended already. It is how a Profile that keeps its own
// per-endpoint accounting (package disagg's in-flight output tokens)
// releases it with the request, whatever path ends it. Call it at most
// once, before the Decision is handed to the host; a later call replaces
// a function that has not run yet. fn runs on the goroutine that ends the
// request and must not block. Nil-safe.
func (d *Decision) AtEnd(fn func()) {
	if d == nil || fn == nil {
		return
	}
	d.atEnd.Store(&fn)
	if d.ended.Load() {
		d.runAtEnd() // ended before the function was set: run it here, once
	}
}

// runAtEnd runs AtEnd's function if no one has yet.
func (d *Decision) runAtEnd() {
	if d.atEnd.Load() == nil {
		return // none set (AtEnd's Store is seen here or runs it itself)
	}
	if fn := d.atEnd.Swap(nil); fn != nil {
		(*fn)()
	}
}

// errReleased is the DoneInfo.Err of a request released without its Done.
var errReleased = errors.New("kvroute: decision released without its Done")

// Release hands the Decision back to its router for a later Pick to reuse,
// so that a host releasing every Decision routes without allocating one.
// Call it at most once, when the host has made its last use of the
// Decision: after Done (Release ends the request first when Done has not
// come), with no FirstChunk, Done or Served still to come from any
// goroutine, and no field read afterwards (Fallbacks, Roles and Prompts
// included: a later Pick renders into the arrays of Prompts it rendered).
// A Decision filed under a Request.ID or carrying Roles is only ended, not
// reused: the request table, or the host through Router.Decision, may
// still reach it. Releasing is optional: a Decision never released is
// garbage collected as before. Safe on a nil Decision.
func (d *Decision) Release() {
	if d == nil || d.r == nil || !d.released.CompareAndSwap(false, true) {
		return
	}
	d.end(DoneInfo{Err: errReleased}, true) // nothing when Done came
	if d.table != nil || d.Roles != nil {
		return
	}
	r := d.r
	spare := d.spare
	if d.ownsPrompts {
		spare = trimPrompts(d.Prompts)
	}
	*d = Decision{spare: spare}
	r.decisions.Put(d)
}

// newDecision returns a Decision from the router's pool, or a new one.
func (r *Router) newDecision() *Decision {
	d, _ := r.decisions.Get().(*Decision)
	if d == nil {
		d = new(Decision)
	}
	d.r = r
	return d
}

// tableHandle is a Decision as the request table holds it: the table's Done
// (an evicted or expired request) ends the whole request. On a Decision
// that Pick's Profile is still building, the table's calls wait for Pick to
// return it (handOver): the profile may be adding Roles, which ending it
// would miss.
type tableHandle struct{ d *Decision }

func (h tableHandle) FirstChunk() {
	if !h.d.deferToPick(pickFirstChunk) {
		h.d.FirstChunk()
	}
}

func (h tableHandle) Done() {
	if !h.d.deferToPick(pickDropped) {
		h.d.end(DoneInfo{Err: errDropped}, false)
	}
}

func (h tableHandle) Endpoint() string { ep, _ := h.d.servedBy(); return ep }

// deferToPick records what the request table did (pickDropped or
// pickFirstChunk) for handOver to do, and reports whether it did: false
// once Pick has handed d over, when the caller does it itself.
func (d *Decision) deferToPick(what uint32) bool {
	for {
		s := d.pick.Load()
		if s&pickBuilding == 0 {
			return false
		}
		if d.pick.CompareAndSwap(s, s|what) {
			return true
		}
	}
}

// handOver is Pick's last step, when its Profile returns d: from then on
// the request table and Router.Decision reach d and its Roles, all set, and
// what the table did meanwhile (deferToPick) is done now, so that it ends
// every role. Nil-safe.
func (d *Decision) handOver() {
	if d == nil {
		return
	}
	for _, o := range d.Roles {
		o.handOver() // a role committed with the ID
	}
	if d.pick.Load() == 0 {
		return // not filed by the profile, or handed over already
	}
	switch s := d.pick.Swap(0); {
	case s&pickDropped != 0:
		d.end(DoneInfo{Err: errDropped}, false) // the table has unfiled it
	case s&pickFirstChunk != 0:
		d.FirstChunk()
	}
}

// Decision returns the request committed with Request.ID reqID and not yet
// ended, for hosts that keep only the ID between their hooks: they call its
// FirstChunk and Done. An unknown ID (never committed, already done, or
// dropped by the request table's bound) is counted in
// kvroute_tokenload_request_ids_total{outcome="unknown"} and returns nil,
// whose FirstChunk and Done do nothing; so does, uncounted, the ID of a
// request that Pick has not returned yet (its Profile is still picking its
// other roles).
//
// Requests whose Done never comes are bounded by Config.Requests: at most
// MaxRequests are tracked (default 65,536; the oldest is ended beyond that)
// for at most TTL each (default 30 minutes), each drop counted (outcome
// "evicted" or "expired") and warned about once a minute.
func (r *Router) Decision(reqID string) *Decision {
	h, ok := r.requests.Get(reqID)
	if !ok {
		return nil
	}
	if th, ok := h.(tableHandle); ok && th.d.pick.Load()&pickBuilding == 0 {
		return th.d
	}
	return nil // Pick has not returned it yet: its Profile may be adding Roles
}

// EndpointInaccurate reports whether the endpoint's predictions currently
// miss persistently (see Decision.Done and package accuracy).
func (r *Router) EndpointInaccurate(id string) bool { return r.acc.Inaccurate(id) }
