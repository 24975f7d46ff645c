// Package llmd carries an llm-d router configuration over to kvroute: it
// translates the parameters of the llm-d router's precise prefix-cache
// plugins into a kvroute.Config.
//
// An operator moving from the llm-d router (its EndpointPickerConfig) to
// kvroute pastes each plugin's parameters block under a top-level key of
// that plugin's type name in a kvroute configuration, next to kvroute's own
// keys:
//
//	model: Qwen/Qwen3-32B
//	precise-prefix-cache-producer:
//	  tokenProcessorConfig: {blockSizeTokens: 64}
//	  kvEventsConfig:
//	    topicFilter: "kv@"
//	    podDiscoveryConfig: {socketPort: 5556, replaySocketPort: 5557}
//	  speculativeTTL: 2s
//	prefix-cache-affinity-filter:
//	  maxTTFTPenaltyMs: 18000
//	token-load-scorer:
//	  queueThresholdTokens: 4194304
//
// Translate reads such a document (as JSON; YAML is turned into JSON first)
// and is the one entry of this package. kvroute's binaries (kvroute-epp, the
// gateway) read their --config file with it, so a file with or without llm-d
// blocks loads there; kvroute.LoadConfig and kvroute.Config's UnmarshalJSON
// read kvroute's keys only and reject the llm-d blocks as unknown keys.
//
// # Mapping
//
// Each llm-d setting maps onto one kvroute key:
//
//	precise-prefix-cache-producer.
//	  tokenProcessorConfig.blockSizeTokens (alias blockSize) → blockSize
//	  kvEventsConfig.topicFilter                            → events.topicFilter
//	  kvEventsConfig.concurrency                            → events.concurrency
//	  kvEventsConfig.zmqEndpoint                            → events.bindAddress (llm-d's global socket = bind mode)
//	  kvEventsConfig.discoverPods false, no zmqEndpoint     → events.enabled false
//	  kvEventsConfig.podDiscoveryConfig.socketPort          → events.eventsPort
//	  kvEventsConfig.podDiscoveryConfig.replaySocketPort    → events.replayPort; not positive: events.replay false
//	  kvEventsConfig.podDiscoveryConfig.podLabelSelector    → events.selector
//	  speculativeIndexing                                   → speculative.enabled
//	  speculativeTTL (a duration string; <= 0 means 2s)     → speculative.ttl
//	prefix-cache-affinity-filter.
//	  affinityThreshold, explorationProbability,
//	  peakPrefillThroughput                                 → affinity.<same key>
//	  maxTTFTPenaltyMs (milliseconds)                       → affinity.maxTTFTPenalty
//	  ttftSource                                            → only "prefillThroughput" is accepted
//	token-load-scorer.
//	  queueThresholdTokens (<= 0 means 4,194,304)           → queueThresholdTokens
//
// prefixMatchInfoProducerName and inFlightLoadProducerName, which wire llm-d
// plugins to each other, are accepted and ignored. Settings kvroute has no
// equivalent for (indexerConfig, hashSeed, hashAlgorithm, engineType,
// podNamespace, maxInFlightRequestsDelta, ...) are unknown keys, an error,
// as is a setting given both by an llm-d key and by its kvroute key.
package llmd
