// Package models lets one kvroute Router serve several models: it says
// which models each endpoint serves and rewrites the model names clients
// send.
//
// # Served models
//
// kvroute.Endpoint.Models lists the models an endpoint serves (empty: the
// Router's Config.Model only). The Router routes each request only among
// the endpoints serving its model (Request.Model), roots its block keys
// with that model, renders it as that model, and refuses a model no
// candidate serves with kvroute.ErrModelMismatch (a gateway answers 404
// model_not_found) instead of routing it cache-blind. The KV events of an
// endpoint are indexed under the model their topic names
// (kv@<ip:port>@<model>, the topic llm-d configures on vLLM's
// kv-events-config) when it is one of the endpoint's models, so that an
// endpoint serving two models keeps both in the index.
//
// A Registry fills Endpoint.Models (Registry.Annotate) from, in order:
// Config.Served (by endpoint ID), the endpoint label Config.Label (a
// comma-separated list; Kubernetes discovery reads the pod annotation of
// that name; the names it leaves out are counted), and the engines' own GET /v1/models, read by a Poller
// (bounded calls, failures counted, the last good answer kept; an endpoint
// new or at a new address read at once, the old address's answer dropped).
//
// The Poller also learns which served names are LoRA adapters: vLLM lists
// each adapter it has registered (--lora-modules, /v1/load_lora_adapter)
// with its base model's name as "parent". Registry.Adapter reports it, so
// that a gateway routes a request for the adapter as a LoRA request
// (kvroute.Request.LoRA set, for package lora's scorer) among the
// endpoints listing it; its block keys are rooted with the adapter's name
// either way, as vLLM roots them. An adapter only Config.Served or a label
// names has no parent on the wire: Config.Adapters names its base (adapter
// → base; validated: names as Served's, a base no adapter, a Served entry
// listing an adapter lists its base), and wins over the engines' parent.
//
// The Poller keeps the rest of each name's card too (owned_by, root,
// max_model_len; Card), and Registry.Cards merges them over the endpoints
// in endpoint-ID order (the first root and owned_by known, the least
// max_model_len, Adapter's parent; a rewrite name, routed as its target,
// has the base its served targets are all adapters of) for a gateway's own
// GET /v1/models, which lists them in vLLM's ModelCard shape.
//
// # Rewrites
//
// A Table maps a model name to weighted targets, like the Inference
// Extension's InferenceModelRewrite: an alias has one target, a canary
// several ("llama" → 90 "llama-v1", 10 "llama-v2"). The draw uses
// Options.Random, so a seeded source gives a reproducible split, and every
// rewritten request that is routed (Table.Applied; not one refused after
// the draw, because no endpoint serves its target or the pick or the
// admission refuses it) is counted by target in
// kvroute_models_rewrites_total.
//
// # Metrics
//
//   - kvroute_models_rewrites_total{model,target}
//   - kvroute_models_polls_total{endpoint}
//   - kvroute_models_poll_failures_total{endpoint,reason}: reason is
//     connect, status or decode
//   - kvroute_models_names_dropped_total{endpoint}: a name of an
//     endpoint's /v1/models answer that is invalid, over MaxNameBytes,
//     repeated within the answer or beyond MaxModels
//   - kvroute_models_label_names_dropped{endpoint}: a gauge, the names
//     of the endpoint's label (Config.Label) the last Registry.Annotate
//     left out: invalid, over MaxNameBytes, repeated within the label
//     or beyond MaxModels (a blank between commas is no name)
//   - kvroute_models_card_fields_dropped_total{endpoint}: a member of a
//     kept name's card left out (listed as null): an owned_by or root that
//     is not a string, over MaxCardFieldBytes or not printable UTF-8, a
//     max_model_len that is not a positive integer
//   - kvroute_models_served{endpoint}
//   - kvroute_models_unrewritten_aliases{endpoint}: names the endpoint
//     lists as base models with its first served model's root (vLLM's
//     --served-model-name aliases, one KV cache) that no rewrite maps to
//     that model; each is also logged once at warning level (aliases.go)
//
// Labels take configured names and endpoint IDs only, never a name from the
// wire. The package adds no module dependency.
package models
