// Package llmd carries an llm-d router configuration over to kvroute: it
// reads an llm-d EndpointPickerConfig whole, or a kvroute configuration
// carrying llm-d plugin parameters, translates every setting kvroute
// implements into a kvroute.Config and reports every other one, all at
// once, as a Finding.
//
// Load is the entry: it reads YAML or JSON (a key given twice is an error in
// both, as is a YAML stream of more than one document), and kvroute's
// binaries (kvroute-epp, the gateway) read their --config file with it,
// logging each finding on a line of its own at start
// or, with --strict-config, refusing to start. Translate is Load in strict
// mode. LoadResult is Load returning also the stages kvroute runs beside
// the router that an EndpointPickerConfig configures: prefill/decode
// disaggregation (a disagg.Config), session affinity (a session.Config),
// admission (an admission.Config) and LoRA adapter affinity (a
// lora.Config); kvroute-epp uses each unless its own --disagg-config,
// --session-config, --admission-config or --lora-config is given.
// kvroute.LoadConfig and kvroute.Config's UnmarshalJSON read kvroute's
// keys only.
//
// # Two kinds of document
//
// An EndpointPickerConfig (apiVersion llm-d.ai/v1alpha1 or
// inference.networking.x-k8s.io/v1alpha1, kind EndpointPickerConfig) is
// read as llm-d's loader reads it: plugins with type, name (default: the
// type) and parameters; schedulingProfiles with pluginRef and weight (when
// absent, one profile of every plugin, as in llm-d); featureGates,
// saturationDetector, dataLayer, flowControl, requestHandler and parser. A kvroute
// configuration may carry, at its top level, the parameters block of an
// llm-d plugin kvroute implements under that plugin's type name, next to
// kvroute's own keys:
//
//	model: Qwen/Qwen3-32B
//	precise-prefix-cache-producer:
//	  tokenProcessorConfig: {blockSizeTokens: 64}
//	  kvEventsConfig:
//	    podDiscoveryConfig: {socketPort: 5556, replaySocketPort: 5557}
//	prefix-cache-affinity-filter:
//	  maxTTFTPenaltyMs: 18000
//
// Only the plugins that set the router's own keys (those of the mapping
// below, up to the stages) are taken there, as their parameters blocks
// are all they need. The plugins of a stage beside the router (P/D,
// session affinity, LoRA affinity) are refused with an error naming where
// that stage is configured: in an EndpointPickerConfig, whose scheduling
// profiles give a scorer its weight and a profile handler its decider, or
// with kvroute-epp's --disagg-config, --session-config or --lora-config.
//
// # Mapping
//
// Each llm-d setting kvroute implements maps onto one kvroute key:
//
//	precise-prefix-cache-producer (and the deprecated precise-prefix-cache-scorer).
//	  tokenProcessorConfig.blockSizeTokens (alias blockSize) → blockSize
//	  kvEventsConfig.topicFilter                            → events.topicFilter
//	  kvEventsConfig.concurrency                            → events.concurrency
//	  kvEventsConfig.engineType                             → events.engine
//	  kvEventsConfig.tracing                                → events.tracing.enabled
//	  kvEventsConfig.zmqEndpoint                            → events.bindAddress (llm-d's global socket = bind mode)
//	  kvEventsConfig.discoverPods false, no zmqEndpoint     → events.enabled false
//	  kvEventsConfig.podDiscoveryConfig.socketPort          → events.eventsPort
//	  kvEventsConfig.podDiscoveryConfig.replaySocketPort    → events.replayPort; not positive: events.replay false
//	  speculativeIndexing                                   → speculative.enabled
//	  speculativeTTL (a duration string; <= 0 or "": 2s)    → speculative.ttl
//	prefix-cache-affinity-filter.
//	  affinityThreshold, explorationProbability,
//	  peakPrefillThroughput                                 → affinity.<same key> (affinityThreshold < 0: 0, the filter off)
//	  maxTTFTPenaltyMs (milliseconds)                       → affinity.maxTTFTPenalty
//	token-load-scorer.
//	  queueThresholdTokens (<= 0 means 4,194,304)           → queueThresholdTokens
//	  its weight in the (first) scheduling profile (a P/D
//	  handler's prefill profile under P/D, its decode
//	  profile without; found by name, in any order)         → loadWeight
//	token-producer (and the legacy tokenizer).
//	  modelName                                             → model
//	  vllm.url, vllm.timeout, vllm.mmTimeout ("": default)  → render.url, render.timeout, render.mmTimeout
//	  vllm.messagesRenderMode, vllm.responsesRenderMode,
//	  vllm.prefillOnly, vllm.omitMMKwargs                   → render.<same key>
//	  vllm.endpointDiscovery (rendering on the pool's
//	  endpoints, round robin; never beside vllm.url)        → no render.url: kvroute renders on the routed endpoints
//	  vllm.endpointDiscovery.attemptTimeout (positive)      → render.attemptTimeout
//	  (absent: llm-d caps no attempt, kvroute each at 2s: a finding)
//	  none of vllm, modelName, udsTokenizerConfig           → llm-d's estimate backend: a finding, kvroute renders
//	inflight-load-producer                                  → kvroute's own in-flight accounting, always on
//
// and, in an EndpointPickerConfig, the stages beside the router:
//
//	disagg-profile-handler (or pd-profile-handler) with
//	  deciders.prefill (alias prefillDeciderPluginName,
//	  deciderPluginName; pd-profile-handler's default
//	  prefix-based-pd-decider) naming a
//	  prefix-based-pd-decider.nonCachedTokens               → disagg nonCachedTokens (0, llm-d's decider off: no P/D)
//	  always-disagg-pd-decider                              → disagg nonCachedTokens -1 (every request with a prompt)
//	disagg-profile-handler with stageOrder prefill-first
//	  and no prefill decider (prefilling every request)     → disagg nonCachedTokens -1
//	prefill-filter, decode-filter                           → the roles of the pods' llm-d.ai/role label (disagg.DefaultRoleLabel)
//	session-affinity-scorer or -filter (the first that a
//	  scheduling profile kvroute runs references pinning
//	  the decode pick; kvroute keeps one session store).
//	  strategy encoded_endpoint_header (the default):
//	    encodedEndpointHeaderConfig.header (x-session-token) → session headers
//	  strategy session_id:
//	    sessionIdConfig.sources[].header (x-session-id)     → session headers; no cookie source: cookie "-" (none read or set)
//	    sources[] {attribute: SessionIDDataKey, producer}
//	    naming a session-id-producer:
//	      its headerName                                    → a session header, in the sources' order
//	      its cookieName (one)                              → session cookie, read after the headers, setCookie false
//	    sessionIdConfig.evictionTtlSeconds (0 means 300;   → session ttl
//	      a negative one is refused)
//	  the scorer's weight in the first scheduling profile
//	  (a P/D handler's decode profile; a finding when the
//	  prefill profile weighs it otherwise; at 0 or below,
//	  muted or inverted in llm-d, no session affinity)      → session weight
//	featureGates flowControl (or flowControl=true)          → an admission stage
//	  flowControl.defaultRequestTTL (absent means 60s)      → admission queueTimeout
//	lora-affinity-scorer (the first one a profile kvroute
//	  runs references; it takes no parameters)              → the LoRA scorer (package lora)
//	  its weight in the first scheduling profile (a P/D
//	  handler's decode profile, else the prefill one; a
//	  finding when the two weigh it differently)            → lora weight (0: no LoRA scorer, as llm-d mutes it)
//
// In an EndpointPickerConfig, the precise producer's settings the document
// leaves unset take llm-d's defaults where kvroute's differ, since the
// engines were set up for llm-d's picker: 16-token blocks, events on port
// 5557, no replay, no speculative indexing. Its prefix-cache-affinity-filter
// becomes kvroute's, which also applies kvroute's crowding rule (a finding
// says so). Without a precise producer,
// kvroute keeps its index with its own defaults (a finding says so).
//
// The deprecated precise-prefix-cache-scorer beside a
// precise-prefix-cache-producer reads the producer's index in llm-d; kvroute
// keeps one index, with the producer's parameters (a finding says so).
//
// The names that wire llm-d plugins to each other (prefixMatchInfoProducerName,
// inFlightLoadProducerName) need nothing when they name the precise producer
// and the in-flight load producer: kvroute's parts always read kvroute's
// own index and load.
//
// # Findings
//
// Every other plugin, parameter and key of the document is a Finding with
// its path and one of three kinds: NoEquivalent (kvroute lacks it: an
// encode stage, a minimum prompt length for P/D, pinning a session's
// prefill pick, latency-predicting admitters), Different (kvroute reaches
// the same end another way, said in the note, which names the kvroute-epp
// flag and keys to set: the kv-cache-utilization and queue scorers are its
// token-load scorer, the UDS tokenizer its render client, the saturation
// detectors its admission's saturation keys and --engine-metrics-config,
// priority bands and fairness and ordering policies its admission's
// queue, fairness and ordering keys, the session affinity filter its
// session scorer) or NotNeeded
// (meaningless for kvroute: max-score-picker, the role filters and header
// handlers under P/D, pod discovery plumbing, the block-key hashSeed).
// A translated stage's differences are findings too: llm-d's
// session-affinity scorer gives a flat 1 where kvroute's weighs the
// session's endpoint's headroom, llm-d takes priorities from
// InferenceObjective resources where kvroute's admission takes them from
// its objectives key, and llm-d's lora-affinity-scorer ranks an engine
// with a free adapter slot (0.8) above one where the adapter waits (0.6)
// where kvroute's LoRA scorer ranks waiting (0.7) above a load (0.4). A hashSeed never changes
// kvroute's block keys: they have no seed, and engines' block hashes
// (seeded in vLLM by PYTHONHASHSEED) are mapped per endpoint, never
// recomputed, so any seed works. Keys that are neither llm-d's nor
// kvroute's are errors, as are two keys setting one kvroute setting.
package llmd
