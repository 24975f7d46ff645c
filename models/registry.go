package models

import (
	"maps"
	"slices"
	"strings"

	"github.com/kvroute/kvroute"
)

// Registry is what a gateway holds for several models: the source of each
// endpoint's served models (configuration, an endpoint label, the engines'
// /v1/models) and the rewrite table. Annotate fills Endpoint.Models, which
// the Router reads to choose each request's candidates; Resolve applies the
// rewrite table. It is safe for concurrent use; Close stops its poller and
// unregisters its metrics.
type Registry struct {
	cfg    Config
	table  *Table
	poller *Poller     // nil unless Config.Poll.Enabled
	drops  *labelDrops // names the endpoint labels dropped
}

// New builds a Registry from cfg, starting its poller when
// cfg.Poll.Enabled.
func New(cfg Config, opts Options) (*Registry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	// Read on every request: the Registry's own copies, which a caller's
	// later change to its maps does not reach.
	served := make(map[string][]string, len(cfg.Served))
	for id, ms := range cfg.Served {
		served[id] = slices.Clone(ms)
	}
	cfg.Served, cfg.Adapters = served, maps.Clone(cfg.Adapters)
	t, err := NewTable(cfg.Rewrites, opts)
	if err != nil {
		return nil, err
	}
	drops, err := newLabelDrops(opts.Registerer)
	if err != nil {
		t.met.unregister()
		return nil, err
	}
	r := &Registry{cfg: cfg, table: t, drops: drops}
	if cfg.Poll.Enabled {
		if r.poller, err = newPoller(cfg.Poll, opts, t); err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// Table returns the rewrite table.
func (r *Registry) Table() *Table { return r.table }

// Poller returns the /v1/models poller; nil unless Config.Poll.Enabled.
func (r *Registry) Poller() *Poller { return r.poller }

// Resolve is Table.Resolve.
func (r *Registry) Resolve(model string) (string, bool) { return r.table.Resolve(model) }

// Applied is Table.Applied: it counts a rewrite Resolve drew once the
// request is routed as its target.
func (r *Registry) Applied(model, target string) { r.table.Applied(model, target) }

// SetEndpoints gives the poller the endpoints to read (nil-safe without
// one).
func (r *Registry) SetEndpoints(eps []kvroute.Endpoint) {
	if r.poller != nil {
		r.poller.SetEndpoints(eps)
	}
}

// Annotate returns a copy of eps with each endpoint's Models filled, from
// the first source that names it: Config.Served, the endpoint's Label
// (comma-separated; invalid and repeated names and those beyond
// PollConfig.MaxModels are left out, counted by endpoint in
// kvroute_models_label_names_dropped
// as of this call), the poller's last good answer (one that kept at least
// one name), else the Models it already had. An endpoint no source names
// keeps empty Models: the router's model only.
func (r *Registry) Annotate(eps []kvroute.Endpoint) []kvroute.Endpoint {
	out := slices.Clone(eps)
	var drops map[string]int
	for i := range out {
		e := &out[i]
		if ms, ok := r.cfg.Served[e.ID]; ok {
			e.Models = slices.Clone(ms)
			continue
		}
		if v, ok := e.Labels[r.cfg.Label]; ok {
			ms, dropped := ParseList(v, r.cfg.Poll.MaxModels)
			if dropped > 0 {
				if drops == nil {
					drops = map[string]int{}
				}
				drops[e.ID] += dropped
			}
			if len(ms) > 0 {
				e.Models = ms
				continue
			}
		}
		if r.poller != nil {
			if ms, ok := r.poller.Models(e.ID); ok && len(ms) > 0 {
				e.Models = ms
				continue
			}
		}
		e.Models = slices.Clone(e.Models)
	}
	r.drops.set(drops)
	return out
}

// Adapter reports whether model is a LoRA adapter, and of which base
// model: Config.Adapters' entry for it, else what the /v1/models of an
// endpoint of eps last said (its "parent"; see Poller; the least base when
// two disagree). False when neither names a base: the model is then one
// of its own.
func (r *Registry) Adapter(eps []kvroute.Endpoint, model string) (base string, ok bool) {
	if model == "" {
		return "", false
	}
	if base, ok := r.cfg.Adapters[model]; ok {
		return base, true
	}
	if r.poller == nil {
		return "", false
	}
	return r.poller.parentIn(eps, model)
}

// Cards returns what a gateway's GET /v1/models lists, sorted by ID: a
// card for each name of List(eps, base, table), merged over the cards the
// endpoints of eps last gave it on their /v1/models, taken in endpoint-ID
// order so that the merge does not depend on the order of eps: OwnedBy and
// Root the first known, MaxModelLen the least known (a request that fits
// it fits every engine serving the model), Parent the base the request is
// routed as an adapter of (routedParent: Adapter's, or for a name the
// rewrite table rewrites, its targets'). A rewritten name has its served
// targets' OwnedBy and Root where they all agree and the least of their
// MaxModelLen (rewrittenCard). A name no engine described (from Served, a
// label) has what is known: its ID, and its Parent when Config.Adapters
// names one.
func (r *Registry) Cards(eps []kvroute.Endpoint, base string) []Card {
	names := List(eps, base, r.table)
	var known map[string][]Card
	if r.poller != nil {
		ids := make([]string, len(eps))
		for i := range eps {
			ids[i] = eps[i].ID
		}
		slices.Sort(ids)
		known = r.poller.cardsOf(slices.Compact(ids), names)
	}
	out := make([]Card, 0, len(names))
	for _, n := range names {
		var c Card
		if _, rewritten := r.table.rules[n]; rewritten {
			c = r.rewrittenCard(eps, base, n, known)
		} else {
			c = mergeCards(n, known[n])
		}
		c.Parent = r.routedParent(eps, base, n)
		out = append(out, c)
	}
	return out
}

// mergeCards merges the cards the engines gave of one name, in endpoint-ID
// order: OwnedBy and Root the first known, MaxModelLen the least known.
func mergeCards(id string, cards []Card) Card {
	c := Card{ID: id}
	for _, k := range cards {
		if c.OwnedBy == "" {
			c.OwnedBy = k.OwnedBy
		}
		if c.Root == "" {
			c.Root = k.Root
		}
		c.MaxModelLen = leastKnown(c.MaxModelLen, k.MaxModelLen)
	}
	return c
}

// leastKnown is the lesser of two lengths, 0 being unknown.
func leastKnown(a, b int) int {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// rewrittenCard is the card of a name the rewrite table rewrites, from its
// served targets' merged cards (a request for it is served as one of them):
// OwnedBy and Root when every served target has the same one (an alias
// has its target's; a canary over two checkpoints has no one root),
// MaxModelLen the least known, as a request must fit whichever target is
// drawn. Its Parent is set by the caller (routedParent).
func (r *Registry) rewrittenCard(eps []kvroute.Endpoint, base, name string, known map[string][]Card) Card {
	c := Card{ID: name}
	first := true
	for _, tg := range r.table.rules[name].targets {
		if !Serves(eps, tg, base) {
			continue // never routed to: a request drawing it is refused
		}
		k := mergeCards(tg, known[tg])
		if first {
			c.OwnedBy, c.Root, first = k.OwnedBy, k.Root, false
		} else {
			if c.OwnedBy != k.OwnedBy {
				c.OwnedBy = ""
			}
			if c.Root != k.Root {
				c.Root = ""
			}
		}
		c.MaxModelLen = leastKnown(c.MaxModelLen, k.MaxModelLen)
	}
	return c
}

// routedParent is the base model a request naming model is routed as a
// LoRA adapter of, "" when it is routed as a model of its own. A name the
// rewrite table rewrites is routed as the target drawn: its parent is the
// base its served targets are all adapters of, as vLLM lists each of them
// ("" when one is no adapter, or two are adapters of different bases: a
// model list gives a name one parent). Any other name is Adapter's.
func (r *Registry) routedParent(eps []kvroute.Endpoint, base, model string) string {
	ru, ok := r.table.rules[model]
	if !ok {
		parent, _ := r.Adapter(eps, model)
		return parent
	}
	parent := ""
	for _, tg := range ru.targets {
		if !Serves(eps, tg, base) {
			continue // never routed to: a request drawing it is refused
		}
		p, ok := r.Adapter(eps, tg)
		if !ok || (parent != "" && p != parent) {
			return ""
		}
		parent = p
	}
	return parent
}

// Close stops the poller and unregisters the metrics New registered (the
// rewrite counters, the label drops gauge, the poller's); a second call
// does nothing more.
func (r *Registry) Close() {
	if r.poller != nil {
		r.poller.Close()
	}
	r.drops.close()
	r.table.met.unregister()
}

// ParseList parses a comma-separated list of model names (a label or
// annotation value), trimming spaces and leaving out empty, invalid and
// repeated names and those beyond max (0: DefaultMaxModels). dropped counts
// the names left out: invalid ones, repeats and those beyond max, as the
// poller counts the names of an engine's answer, which a caller reports as
// a problem of the list; a blank between commas is no name and is not
// counted.
func ParseList(v string, max int) (names []string, dropped int) {
	if max <= 0 {
		max = DefaultMaxModels
	}
	for part := range strings.SplitSeq(v, ",") {
		part = strings.TrimSpace(part)
		switch {
		case part == "":
		case slices.Contains(names, part) || checkName(part) != nil || len(names) == max:
			dropped++
		default:
			names = append(names, part)
		}
	}
	return names, dropped
}

// Served returns the sorted union of the models eps serve, an endpoint
// without Models serving base: what a gateway's /v1/models lists.
func Served(eps []kvroute.Endpoint, base string) []string {
	var out []string
	for _, e := range eps {
		ms := e.Models
		if len(ms) == 0 && base != "" {
			ms = []string{base}
		}
		for _, m := range ms {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	slices.Sort(out)
	return out
}

// List returns what a gateway's GET /v1/models lists, sorted: the models
// eps serve (Served) and each name t rewrites while one of its targets is
// served. A name whose targets no endpoint serves is left out: every
// request for it would be refused as a model nobody serves.
func List(eps []kvroute.Endpoint, base string, t *Table) []string {
	out := Served(eps, base)
	if t == nil {
		return out
	}
	for m, ru := range t.rules {
		if slices.Contains(out, m) {
			continue
		}
		for _, tg := range ru.targets {
			if Serves(eps, tg, base) {
				out = append(out, m)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// Serves reports whether some endpoint of eps serves model, "" being
// base and an endpoint without Models serving base (the Router's rule).
func Serves(eps []kvroute.Endpoint, model, base string) bool {
	if model == "" {
		model = base
	}
	for _, e := range eps {
		if len(e.Models) == 0 {
			if model == base {
				return true
			}
			continue
		}
		if slices.Contains(e.Models, model) {
			return true
		}
	}
	return false
}
