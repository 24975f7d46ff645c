package models

import (
	"math/rand/v2"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// Table is the model-rewrite table: a model name clients send mapped to
// weighted target models, one target drawn per request. It is how an
// operator aliases a model ("chat" → "llama-3-8b-v2") or sends a share of
// a model's traffic to a canary ("llama" → 90 % "llama-v1", 10 %
// "llama-v2"), like the Inference Extension's InferenceModelRewrite (an
// Exact match and weighted targets). The draw comes from Options.Random,
// so a test or a simulation gets a deterministic split. A rewrite applied
// to a request (Applied) is counted in
// kvroute_models_rewrites_total{model,target}, labelled with configured
// names only. A Table is immutable and safe for concurrent use.
type Table struct {
	rules  map[string]*rule
	random func() float64
	met    *rewriteMetrics // unregistered by the Registry's Close
}

// rule is one Rule, its cumulative weights precomputed.
type rule struct {
	targets []string
	cum     []int // cum[i] = sum of the weights of targets[0..i]
	counts  []prometheus.Counter
}

// NewTable builds a Table from rules (validated as Config.Validate does).
// Its counters are registered on opts.Registerer (nil: none).
func NewTable(rules []Rule, opts Options) (*Table, error) {
	if err := validateRules(rules); err != nil {
		return nil, err
	}
	m, err := newRewriteMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	t := &Table{rules: make(map[string]*rule, len(rules)), random: opts.Random, met: m}
	if t.random == nil {
		t.random = rand.Float64
	}
	for _, r := range rules {
		ru := &rule{}
		sum := 0
		for _, tg := range r.Targets {
			w := tg.Weight
			if w == 0 {
				w = 1
			}
			sum += w
			ru.targets = append(ru.targets, tg.Model)
			ru.cum = append(ru.cum, sum)
			ru.counts = append(ru.counts, m.rewrites.WithLabelValues(r.Model, tg.Model))
		}
		t.rules[r.Model] = ru
	}
	return t, nil
}

// Resolve returns the model a request naming model is sent as: a target
// drawn by weight when a rule names model, else model itself (rewritten
// false). It counts nothing: the caller counts the rewrite with Applied
// once the request is sent as target, so that a request refused after the
// draw (its target served by no endpoint) is no rewrite. A nil Table
// rewrites nothing.
func (t *Table) Resolve(model string) (target string, rewritten bool) {
	if t == nil {
		return model, false
	}
	ru, ok := t.rules[model]
	if !ok {
		return model, false
	}
	i := 0
	if len(ru.targets) > 1 {
		x := int(t.random() * float64(ru.cum[len(ru.cum)-1]))
		for i < len(ru.cum)-1 && x >= ru.cum[i] {
			i++
		}
	}
	return ru.targets[i], true
}

// Applied counts one request for model that Resolve rewrote to target and
// that is routed as target, in kvroute_models_rewrites_total{model,target}.
// A pair the table does not hold (no rule for model, or target none of its
// targets) counts nothing: the labels take configured names only.
func (t *Table) Applied(model, target string) {
	if t == nil {
		return
	}
	if ru, ok := t.rules[model]; ok {
		if i := slices.Index(ru.targets, target); i >= 0 {
			ru.counts[i].Inc()
		}
	}
}

// Names returns the model names the table rewrites, in no set order.
func (t *Table) Names() []string {
	if t == nil {
		return nil
	}
	out := make([]string, 0, len(t.rules))
	for m := range t.rules {
		out = append(out, m)
	}
	return out
}
