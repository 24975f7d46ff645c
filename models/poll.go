package models

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
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
// The poller also keeps, for each name kept, the rest of its card as the
// engine gave it (Card: owned_by, root, max_model_len), which a gateway's
// own GET /v1/models relays (Registry.Cards). A member that is not a
// string (an integer for max_model_len), is over MaxCardFieldBytes, not
// printable UTF-8 or (max_model_len) not positive is left out of the card
// (unknown, null in the gateway's list) and counted in
// kvroute_models_card_fields_dropped_total; the name is kept.
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
	rewrites *Table // the Registry's, to tell which aliases are rewritten (nil: none)

	mu      sync.Mutex
	urls    map[string]string            // endpoint ID → base URL, as last given
	models  map[string][]string          // endpoint ID → its last good answer
	parents map[string]map[string]string // endpoint ID → adapter → base model, of that answer (absent: none)
	cards   map[string][]Card            // endpoint ID → the cards of that answer's names, in its order
	aliases map[string][]string          // endpoint ID → that answer's unrewritten aliases (unrewrittenAliases), as last logged

	kick   chan struct{} // a new endpoint: poll now
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// NewPoller starts a poller over no endpoints; give it some with
// SetEndpoints.
func NewPoller(cfg PollConfig, opts Options) (*Poller, error) {
	return newPoller(cfg, opts, nil)
}

// newPoller is NewPoller with the rewrite table the aliases it reports are
// checked against (see aliases.go).
func newPoller(cfg PollConfig, opts Options, rewrites *Table) (*Poller, error) {
	c := Config{Poll: cfg}.withDefaults()
	cfg = c.Poll
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("models: %w", err)
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
	p := &Poller{cfg: cfg, client: client, owned: owned, clock: opts.Clk(), log: opts.Log(), met: m, onChange: opts.OnChange, rewrites: rewrites,
		urls: map[string]string{}, models: map[string][]string{}, parents: map[string]map[string]string{}, cards: map[string][]Card{},
		aliases: map[string][]string{}, kick: make(chan struct{}, 1), done: make(chan struct{})}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	go p.run()
	return p, nil
}

// SetEndpoints replaces the endpoints polled; a new one is polled at once,
// a removed one forgotten with its series. One whose URL changed (a pod
// replaced at a new address under the same ID) is a new engine: the answer
// of its old URL is dropped, with the gauges that describe it, and it is
// polled at once, so that it is not routed by the models its predecessor
// served until the next interval.
func (p *Poller) SetEndpoints(eps []kvroute.Endpoint) {
	p.mu.Lock()
	next := make(map[string]string, len(eps))
	added := false
	for _, e := range eps {
		next[e.ID] = e.URL()
		if old, ok := p.urls[e.ID]; !ok {
			added = true
		} else if old != next[e.ID] {
			p.dropAnswer(e.ID)
			p.met.forgetAnswer(e.ID)
			added = true
		}
	}
	for id := range p.urls {
		if _, ok := next[id]; !ok {
			p.dropAnswer(id)
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

// dropAnswer forgets endpoint id's last answer; p.mu is held.
func (p *Poller) dropAnswer(id string) {
	delete(p.models, id)
	delete(p.parents, id)
	delete(p.cards, id)
	delete(p.aliases, id)
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

// parentIn returns the base model of which model is a LoRA adapter at an
// endpoint of eps whose last good answer says so, under one lock: the
// least base name such answers give, so that the answer does not depend on
// the order of eps when two engines disagree.
func (p *Poller) parentIn(eps []kvroute.Endpoint, model string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.parents) == 0 {
		return "", false
	}
	least, found := "", false
	for i := range eps {
		if base, ok := p.parents[eps[i].ID][model]; ok && (!found || base < least) {
			least, found = base, true
		}
	}
	return least, found
}

// cardsOf returns, for each model of names, the cards the endpoints ids
// (in that order) last gave it.
func (p *Poller) cardsOf(ids []string, names []string) map[string][]Card {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string][]Card{}
	for _, id := range ids {
		for _, c := range p.cards[id] {
			if slices.Contains(names, c.ID) {
				out[c.ID] = append(out[c.ID], c)
			}
		}
	}
	return out
}

// Close stops the poller, waits for its goroutine, deletes its endpoints'
// series and unregisters the metrics NewPoller registered. It is
// idempotent.
func (p *Poller) Close() {
	p.cancel()
	<-p.done
	if p.owned != nil {
		p.owned.CloseIdleConnections()
	}
	p.mu.Lock()
	for id := range p.urls {
		p.met.forget(id)
	}
	p.mu.Unlock()
	p.met.unregister()
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
		var c cleaned
		if reason == "" {
			if c = p.clean(cards); len(c.names) == 0 {
				reason = failDecode // no name to keep: no good answer
			}
		}
		ms, parents := c.names, c.parents
		failed := reason != "" && ctx.Err() == nil // a call cut short by Close is no failure
		// The endpoint's series are written under mu, as SetEndpoints
		// forgets them: an endpoint removed meanwhile gets none back, and
		// one moved to another URL keeps nothing of its old URL's answer
		// (SetEndpoints kicked a poll of the new one).
		p.mu.Lock()
		if u, still := p.urls[id]; !still || u != urls[id] {
			p.mu.Unlock()
			continue
		}
		if c.dropped > 0 {
			p.met.dropped.WithLabelValues(id).Add(float64(c.dropped))
		}
		if c.fieldsDropped > 0 {
			p.met.fields.WithLabelValues(id).Add(float64(c.fieldsDropped))
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
		p.cards[id] = c.cards // no change of routing: read when a list is asked for
		p.met.polls.WithLabelValues(id).Inc()
		p.met.served.WithLabelValues(id).Set(float64(len(ms)))
		first, aliases := unrewrittenAliases(c.cards, p.rewrites)
		var fresh []string
		for _, a := range aliases {
			if !slices.Contains(p.aliases[id], a) {
				fresh = append(fresh, a)
			}
		}
		p.aliases[id] = aliases
		p.met.aliases.WithLabelValues(id).Set(float64(len(aliases)))
		p.mu.Unlock()
		for _, a := range fresh {
			p.log.Warn("models: an endpoint lists a name with its first served model's root and no rewrite to it; "+
				"if it is a served-name alias of one engine (vLLM's --served-model-name), its requests are routed without cache information "+
				"(the engine's KV events are indexed under the first name): add a rewrite from it to the first name",
				"endpoint", id, "name", a, "first", first)
		}
	}
	return changed
}

// modelCard is the part of one entry of an OpenAI model list the poller
// reads: vLLM's ModelCard sets parent on a LoRA adapter's (its base
// model's served name) and leaves it null on a base model's. The members
// the poller only relays are read raw, so that one of another type costs
// that member only, not the answer.
type modelCard struct {
	ID          string          `json:"id"`
	Parent      string          `json:"parent"`
	OwnedBy     json.RawMessage `json:"owned_by"`
	Root        json.RawMessage `json:"root"`
	MaxModelLen json.RawMessage `json:"max_model_len"`
}

// Card is what an engine's /v1/models said of one model it lists: the
// members of vLLM's ModelCard (vllm/entrypoints/openai protocol) that a
// gateway's own list relays. A zero member is unknown (null in the list).
type Card struct {
	// ID is the model's served name.
	ID string
	// OwnedBy is the card's owned_by ("vllm" for vLLM).
	OwnedBy string
	// Root is the card's root: a base model's path, an adapter's
	// lora_path.
	Root string
	// Parent is an adapter's base model ("" for a base model).
	Parent string
	// MaxModelLen is the card's max_model_len (vLLM gives it on its base
	// models' cards only).
	MaxModelLen int
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
	cards, ok := decodeModelList(body)
	if !ok {
		return nil, failDecode
	}
	return cards, ""
}

// decodeModelList reads an engine's /v1/models answer: its cards, or false
// when it is not a JSON object with a "data" list.
func decodeModelList(body []byte) ([]modelCard, bool) {
	var l modelList
	if err := json.Unmarshal(body, &l); err != nil || l.Data == nil {
		return nil, false
	}
	return l.Data, true
}

// cleaned is what clean keeps of one answer.
type cleaned struct {
	names         []string          // the names kept, in the engine's order
	parents       map[string]string // the adapters among them → their base model (nil for none)
	cards         []Card            // one per name kept, in the same order
	dropped       int               // names left out
	fieldsDropped int               // members of kept names' cards left out
}

// clean keeps the valid, distinct names up to MaxModels, in the engine's
// order (vLLM lists its base model first: Endpoint.Models' first name is
// the model its events default to), and returns how many it left out, the
// adapters among the names kept (each whose parent is another name kept,
// mapped to it) and each kept name's card. The names are kept until the
// next good answer, so they hold room for MaxModels at most, however long
// the answer's list.
func (p *Poller) clean(cards []modelCard) cleaned {
	c := cleaned{names: make([]string, 0, min(len(cards), p.cfg.MaxModels))}
	kept := make([]bool, len(cards))
	for i, mc := range cards {
		if checkName(mc.ID) != nil || slices.Contains(c.names, mc.ID) || len(c.names) == p.cfg.MaxModels {
			c.dropped++
			continue
		}
		c.names = append(c.names, mc.ID)
		kept[i] = true
	}
	c.cards = make([]Card, 0, len(c.names))
	for i, mc := range cards {
		if !kept[i] {
			continue
		}
		card := Card{ID: mc.ID}
		var bad int
		card.OwnedBy, bad = cardText(mc.OwnedBy)
		c.fieldsDropped += bad
		card.Root, bad = cardText(mc.Root)
		c.fieldsDropped += bad
		card.MaxModelLen, bad = cardLen(mc.MaxModelLen)
		c.fieldsDropped += bad
		if mc.Parent != "" && mc.Parent != mc.ID && slices.Contains(c.names, mc.Parent) {
			if c.parents == nil {
				c.parents = map[string]string{}
			}
			c.parents[mc.ID] = mc.Parent
			card.Parent = mc.Parent
		}
		c.cards = append(c.cards, card)
	}
	return c
}

// cardText reads a card's string member: "" and 0 when absent or null, ""
// and 1 (left out) when not a string, over MaxCardFieldBytes or not
// printable UTF-8.
func cardText(raw json.RawMessage) (string, int) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", 0
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil || len(v) > MaxCardFieldBytes || !printable(v) {
		return "", 1
	}
	return v, 0
}

// cardLen reads a card's max_model_len: 0 and 0 when absent or null, 0
// and 1 (left out) when not a positive integer that fits an int32 (vLLM's
// lengths do).
func cardLen(raw json.RawMessage) (int, int) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, 0
	}
	var v int64
	if err := json.Unmarshal(raw, &v); err != nil || v <= 0 || v > math.MaxInt32 {
		return 0, 1
	}
	return int(v), 0
}
