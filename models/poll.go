package models

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/telemetry"
)

// Poller reads each endpoint's served models from its OpenAI-compatible
// GET /v1/models (vLLM lists its served model names and loaded LoRA
// adapters there) every PollConfig.Interval, one endpoint at a time, each
// call bounded by PollConfig.Timeout and its answer by 1 MiB. An endpoint
// keeps the models of its last good answer; a failed call is counted in
// kvroute_models_poll_failures_total{endpoint,reason} (connect, status,
// decode), names that are invalid, over MaxNameBytes, repeated within the
// answer or beyond MaxModels in kvroute_models_names_dropped_total. An answer that leaves no name to keep
// (an empty list, or every name dropped) is no good answer: it fails as
// decode. An endpoint never answered has no models yet (Models reports
// false) and so serves the router's model only.
//
// A name listed with a "parent" that names another model of the same
// answer is a LoRA adapter of that base model: vLLM lists each adapter it
// has registered (--lora-modules, /v1/load_lora_adapter) with its base
// model's served name as parent, and the base model without one. Parent
// reports it, so that a gateway routes a request for the adapter as a LoRA
// request of its base model; a parent that names no model of the answer is
// ignored (the name is kept as a model of its own).
//
// One goroutine, started by NewPoller and ended by Close, runs the polls;
// it owns nothing but reads and writes the endpoint table under mu.
type Poller struct {
	cfg      PollConfig
	client   *http.Client
	owned    *http.Transport // the client's transport when the Poller made it; its idle connections are closed by Close
	clock    telemetry.Clock
	log      *slog.Logger
	met      *pollMetrics
	onChange func()

	mu      sync.Mutex
	urls    map[string]string            // endpoint ID → base URL, as last given
	models  map[string][]string          // endpoint ID → its last good answer
	parents map[string]map[string]string // endpoint ID → adapter → base model, of that answer (absent: none)

	kick   chan struct{} // a new endpoint: poll now
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// NewPoller starts a poller over no endpoints; give it some with
// SetEndpoints.
func NewPoller(cfg PollConfig, opts Options) (*Poller, error) {
	c := Config{Poll: cfg}.withDefaults()
	cfg = c.Poll
	if cfg.Interval < 0 || cfg.Timeout < 0 || cfg.MaxModels < 0 {
		return nil, errors.New("models: poll: negative interval, timeout or maxModels")
	}
	m, err := newPollMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	client, owned := opts.Client, (*http.Transport)(nil)
	if client == nil {
		owned = &http.Transport{MaxIdleConnsPerHost: 1, IdleConnTimeout: 2 * cfg.Interval}
		client = &http.Client{Transport: owned, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	p := &Poller{cfg: cfg, client: client, owned: owned, clock: opts.Clk(), log: opts.Log(), met: m, onChange: opts.OnChange,
		urls: map[string]string{}, models: map[string][]string{}, parents: map[string]map[string]string{}, kick: make(chan struct{}, 1), done: make(chan struct{})}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	go p.run()
	return p, nil
}

// SetEndpoints replaces the endpoints polled; a new one is polled at once,
// a removed one forgotten with its series.
func (p *Poller) SetEndpoints(eps []kvroute.Endpoint) {
	p.mu.Lock()
	next := make(map[string]string, len(eps))
	added := false
	for _, e := range eps {
		next[e.ID] = e.URL()
		if _, ok := p.urls[e.ID]; !ok {
			added = true
		}
	}
	for id := range p.urls {
		if _, ok := next[id]; !ok {
			delete(p.models, id)
			delete(p.parents, id)
			p.met.forget(id)
		}
	}
	p.urls = next
	p.mu.Unlock()
	if added {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

// Models returns the models endpoint id listed in its last good answer, and
// false when it has not answered yet.
func (p *Poller) Models(id string) ([]string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ms, ok := p.models[id]
	return slices.Clone(ms), ok
}

// Parent returns the base model of which model is a LoRA adapter at
// endpoint id, as its last good answer listed it (the model's "parent"),
// and false when that answer listed model without one, or not at all.
func (p *Poller) Parent(id, model string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	base, ok := p.parents[id][model]
	return base, ok
}

// parentIn returns the base model of which model is a LoRA adapter at the
// first endpoint of eps whose last good answer says so, under one lock.
func (p *Poller) parentIn(eps []kvroute.Endpoint, model string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.parents) == 0 {
		return "", false
	}
	for i := range eps {
		if base, ok := p.parents[eps[i].ID][model]; ok {
			return base, true
		}
	}
	return "", false
}

// Close stops the poller and waits for its goroutine. It is idempotent.
func (p *Poller) Close() {
	p.cancel()
	<-p.done
	if p.owned != nil {
		p.owned.CloseIdleConnections()
	}
}

func (p *Poller) run() {
	defer close(p.done)
	t := p.clock.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C():
		case <-p.kick:
		}
		if p.PollOnce(p.ctx) && p.onChange != nil {
			p.onChange()
		}
	}
}

// PollOnce reads every endpoint's /v1/models once, in ID order, and
// reports whether some endpoint's models changed. The poller's goroutine
// calls it every interval; tests and tools may call it directly.
func (p *Poller) PollOnce(ctx context.Context) bool {
	p.mu.Lock()
	ids := make([]string, 0, len(p.urls))
	for id := range p.urls {
		ids = append(ids, id)
	}
	urls := make(map[string]string, len(p.urls))
	for id, u := range p.urls {
		urls[id] = u
	}
	p.mu.Unlock()
	slices.Sort(ids)
	changed := false
	for _, id := range ids {
		if ctx.Err() != nil {
			return changed
		}
		cards, reason := p.fetch(ctx, urls[id])
		var (
			ms      []string
			parents map[string]string
			dropped int
		)
		if reason == "" {
			if ms, parents, dropped = p.clean(cards); len(ms) == 0 {
				reason = failDecode // no name to keep: no good answer
			}
		}
		failed := reason != "" && ctx.Err() == nil // a call cut short by Close is no failure
		// The endpoint's series are written under mu, as SetEndpoints
		// forgets them: an endpoint removed meanwhile gets none back.
		p.mu.Lock()
		if _, still := p.urls[id]; !still {
			p.mu.Unlock()
			continue
		}
		if dropped > 0 {
			p.met.dropped.WithLabelValues(id).Add(float64(dropped))
		}
		if reason != "" {
			if failed {
				p.met.failures.WithLabelValues(id, reason).Inc()
			}
			p.mu.Unlock()
			if failed {
				p.log.Debug("models: /v1/models poll failed; keeping the last answer", "endpoint", id, "reason", reason)
			}
			continue
		}
		old, had := p.models[id]
		if !had || !slices.Equal(old, ms) || !maps.Equal(p.parents[id], parents) {
			p.models[id] = ms
			if parents == nil {
				delete(p.parents, id)
			} else {
				p.parents[id] = parents
			}
			changed = true
		}
		p.met.polls.WithLabelValues(id).Inc()
		p.met.served.WithLabelValues(id).Set(float64(len(ms)))
		p.mu.Unlock()
	}
	return changed
}

// modelCard is the part of one entry of an OpenAI model list the poller
// reads: vLLM's ModelCard sets parent on a LoRA adapter's (its base
// model's served name) and leaves it null on a base model's.
type modelCard struct {
	ID     string `json:"id"`
	Parent string `json:"parent"`
}

// modelList is the part of an OpenAI model list the poller reads.
type modelList struct {
	Data []modelCard `json:"data"`
}

// fetch calls base/v1/models; reason is "" on success, else the failure's.
func (p *Poller) fetch(ctx context.Context, base string) ([]modelCard, string) {
	cctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, base+"/v1/models", nil)
	if err != nil {
		return nil, failConnect
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, failConnect
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxPollBodyBytes))
		return nil, failStatus
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPollBodyBytes+1))
	if err != nil {
		return nil, failConnect
	}
	if len(body) > maxPollBodyBytes {
		return nil, failDecode
	}
	var l modelList
	if err := json.Unmarshal(body, &l); err != nil || l.Data == nil {
		return nil, failDecode
	}
	return l.Data, ""
}

// clean keeps the valid, distinct names up to MaxModels, in the engine's
// order (vLLM lists its base model first: Endpoint.Models' first name is
// the model its events default to), and returns how many it left out, and
// the adapters among the names kept: each whose parent is another name
// kept, mapped to it (nil for none).
func (p *Poller) clean(cards []modelCard) ([]string, map[string]string, int) {
	out := make([]string, 0, len(cards))
	dropped := 0
	kept := make([]bool, len(cards))
	for i, c := range cards {
		if checkName(c.ID) != nil || slices.Contains(out, c.ID) || len(out) == p.cfg.MaxModels {
			dropped++
			continue
		}
		out = append(out, c.ID)
		kept[i] = true
	}
	var parents map[string]string
	for i, c := range cards {
		if !kept[i] || c.Parent == "" || c.Parent == c.ID || !slices.Contains(out, c.Parent) {
			continue
		}
		if parents == nil {
			parents = map[string]string{}
		}
		parents[c.ID] = c.Parent
	}
	return out, parents, dropped
}
