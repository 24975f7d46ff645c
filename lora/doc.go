// Package lora routes requests for LoRA adapters to the engines that
// already serve them: Scorer is a kvroute.Scorer (kvroute.Options.Scorers)
// that rates each candidate by its engine's adapter state, as vLLM reports
// it in vllm:lora_requests_info and package enginemetrics scrapes it.
//
// A vLLM engine started with --enable-lora serves an adapter only once it
// is loaded into one of its --max-loras slots; its scheduler lets at most
// that many distinct adapters into a batch and queues requests whose
// adapter finds no slot, and activating an adapter that is not in a slot
// evicts the least recently used one and stalls the step while its weights
// are copied in. Routing a request to an engine where its adapter already
// runs costs nothing of this; routing it elsewhere costs a load, and, at an
// engine whose slots are full, a wait for a slot and the eviction of
// another adapter whose next request will then pay a load of its own.
//
// The rule, for the adapter named by kvroute.Request.LoRA (the gateway
// sets it from the body's "model" when that is not the base model):
//
//	running (the engine's batch uses it)                 ScoreRunning  1.0
//	waiting (requests of it are queued there)            ScoreWaiting  0.7
//	saturated (running or waiting; ≥ MaxWaiting queued)  ScoreLoad     0.4 + spread
//	would load it into a free slot                       ScoreLoad     0.4 + spread
//	would load it with its max_lora slots full           ScoreLoad − Config.CapPenalty (0.3) + spread
//	no fresh state (never scraped, failed, stale)        ScoreLoad     0.4 + spread (neutral)
//
// times Config.Weight, added to the router's token-load score: the load
// scorer still moves traffic off an engine that is running the adapter but
// busy. The saturated rule withdraws the running or waiting bonus of an
// engine that reports at least Config.MaxWaiting (5) requests waiting
// (vllm:num_requests_waiting), so that a hot adapter spills onto a second
// engine instead of queueing behind one (a negative MaxWaiting never
// withdraws it). spread is a rendezvous hash of (adapter, endpoint ID)
// times HashSpread (0.05): with no state anywhere (a cold start, or every
// engine's metrics down) each router replica sends an adapter to the same
// engine, as Dynamo's rendezvous-hash placement does, instead of loading it
// everywhere. The Gateway API Inference Extension's lora-affinity-scorer
// ranks an engine with a free slot (0.8) above one where the adapter only
// waits (0.6); here waiting ranks above a load, because a waiting request's
// adapter is already on its way into the batch while a load on another
// engine is certain.
//
// A request without an adapter scores 0 everywhere at the cost of one
// string comparison per candidate: no allocation, no lookup (see
// BenchmarkPickNoAdapter). An adapter nobody serves scores every engine as
// "would load"; the engine the request reaches answers it (vLLM's 404 for
// an unknown model), and that answer goes back to the client unchanged.
// Adapter names from requests are never metric labels.
//
// Metrics: kvroute_lora_candidates_total{state} counts the candidates rated,
// by state (running, waiting, load, load_at_cap, saturated, unknown); a
// rising unknown share means the engines' metrics are not fresh and the
// scorer is blind, a rising saturated share that an adapter's engines
// queue and its traffic spills.
// New registers it (nil Registerer: nothing) and Close unregisters it. The
// scorer has no goroutine; its Source (an enginemetrics.Scraper) owns the
// scraping and its own Close.
package lora
