package models

import "slices"

// Served-name aliases an endpoint lists without a rewrite.
//
// vLLM serves one model under every name given to --served-model-name: its
// /v1/models lists each as a base model's card, in the order given, all
// with the same root (the model's path), and the names share one engine
// and one KV cache. Its KV events carry no model; the operator's topic
// names one (llm-d's convention: kv@<ip:port>@<first name>), and kvroute
// roots a request's block keys with the request's model. A request naming
// a further alias is therefore routed among the endpoints listing it but
// matches nothing the events indexed: it is routed without cache
// information. A rewrite from the alias to the first name (Config.Rewrites)
// routes it exactly, and the engine's answer is the same (vLLM names its
// first served name in every response, whichever alias was asked for).
//
// kvroute does not infer the rewrite: two engine processes behind one
// address may list the same root under different names with caches of
// their own, so an equal root does not prove one cache. The Poller
// reports instead, per endpoint, the names that look like such aliases —
// base models listed after the first base model with its root, which no
// rule rewrites to exactly that name — in the gauge
// kvroute_models_unrewritten_aliases{endpoint}, and logs each at warning
// level once, naming the rewrite that would route it.

// unrewrittenAliases returns the answer's first base model and the names
// of cards (one answer, in the engine's order) that look like served-name
// aliases of it and that t (nil: no table) does not rewrite to it.
func unrewrittenAliases(cards []Card, t *Table) (base string, aliases []string) {
	first := -1
	for i, c := range cards {
		if c.Parent == "" {
			first = i
			break
		}
	}
	if first < 0 || cards[first].Root == "" {
		return "", nil
	}
	b := cards[first]
	for _, c := range cards[first+1:] {
		if c.Parent != "" || c.Root != b.Root || rewritesTo(t, c.ID, b.ID) {
			continue
		}
		aliases = append(aliases, c.ID)
	}
	return b.ID, aliases
}

// rewritesTo reports whether t rewrites model to target and to nothing
// else.
func rewritesTo(t *Table, model, target string) bool {
	if t == nil {
		return false
	}
	ru, ok := t.rules[model]
	return ok && !slices.ContainsFunc(ru.targets, func(tg string) bool { return tg != target })
}
