package llmd

import "time"

// plugins are the parameters blocks of the llm-d router's plugins that
// kvroute has settings for, each under its plugin type name, as they may
// appear at the top level of a kvroute configuration document.
type plugins struct {
	PrecisePrefixCacheProducer *precisePrefixCacheProducer `json:"precise-prefix-cache-producer,omitempty"`
	PrefixCacheAffinityFilter  *prefixCacheAffinityFilter  `json:"prefix-cache-affinity-filter,omitempty"`
	TokenLoadScorer            *tokenLoadScorer            `json:"token-load-scorer,omitempty"`
}

// The plugin type names, the keys of plugins.
const (
	pp = "precise-prefix-cache-producer"
	af = "prefix-cache-affinity-filter"
	tl = "token-load-scorer"
)

// precisePrefixCacheProducer is the parameters block of the llm-d
// router's precise-prefix-cache-producer plugin, as far as kvroute has the
// same settings. Keys kvroute has no equivalent for (indexerConfig, hashSeed,
// hashAlgorithm, engineType, podNamespace, ...) are unknown keys, an error.
type precisePrefixCacheProducer struct {
	// TokenProcessorConfig holds the block size.
	TokenProcessorConfig *tokenProcessorConfig `json:"tokenProcessorConfig,omitempty"`
	// KVEventsConfig holds the event subscription settings.
	KVEventsConfig *kvEventsConfig `json:"kvEventsConfig,omitempty"`
	// SpeculativeIndexing is speculative.enabled.
	SpeculativeIndexing *bool `json:"speculativeIndexing,omitempty"`
	// SpeculativeTTL is speculative.ttl, a Go duration string in both; as in
	// llm-d, a value <= 0 means 2 s.
	SpeculativeTTL *time.Duration `json:"speculativeTTL,omitempty"`
}

// tokenProcessorConfig is the producer's tokenProcessorConfig.
type tokenProcessorConfig struct {
	// BlockSizeTokens is blockSize.
	BlockSizeTokens int `json:"blockSizeTokens,omitempty"`
	// BlockSize is llm-d's deprecated alias of BlockSizeTokens.
	BlockSize int `json:"blockSize,omitempty"`
}

// kvEventsConfig is the producer's kvEventsConfig.
type kvEventsConfig struct {
	// ZMQEndpoint (llm-d's global-socket mode: one bound SUB socket that
	// engines connect to) is events.bindAddress.
	ZMQEndpoint string `json:"zmqEndpoint,omitempty"`
	// TopicFilter is events.topicFilter.
	TopicFilter *string `json:"topicFilter,omitempty"`
	// Concurrency is events.concurrency.
	Concurrency int `json:"concurrency,omitempty"`
	// DiscoverPods false with no zmqEndpoint subscribes to nothing in llm-d,
	// so it means events.enabled false. True is kvroute's per-endpoint
	// subscriptions to the endpoints given to SetEndpoints.
	DiscoverPods *bool `json:"discoverPods,omitempty"`
	// PodDiscoveryConfig holds the per-endpoint ports and the selector.
	PodDiscoveryConfig *podDiscoveryConfig `json:"podDiscoveryConfig,omitempty"`
}

// podDiscoveryConfig is the producer's kvEventsConfig.podDiscoveryConfig.
type podDiscoveryConfig struct {
	// PodLabelSelector is events.selector, matched against Endpoint.Labels.
	PodLabelSelector string `json:"podLabelSelector,omitempty"`
	// SocketPort is events.eventsPort.
	SocketPort int `json:"socketPort,omitempty"`
	// ReplaySocketPort is events.replayPort; as in llm-d, a block without a
	// positive replaySocketPort turns replay off (events.replay false).
	ReplaySocketPort int `json:"replaySocketPort,omitempty"`
}

// prefixCacheAffinityFilter is the parameters block of the llm-d
// router's prefix-cache-affinity-filter plugin.
type prefixCacheAffinityFilter struct {
	// AffinityThreshold is affinity.affinityThreshold.
	AffinityThreshold *float64 `json:"affinityThreshold,omitempty"`
	// ExplorationProbability is affinity.explorationProbability.
	ExplorationProbability *float64 `json:"explorationProbability,omitempty"`
	// MaxTTFTPenaltyMs is affinity.maxTTFTPenalty in milliseconds (the key
	// names the unit, so a number is unambiguous here).
	MaxTTFTPenaltyMs *float64 `json:"maxTTFTPenaltyMs,omitempty"`
	// TTFTSource must be "prefillThroughput" (or empty): kvroute's gate
	// estimates TTFT from in-flight tokens and has no latency predictor.
	TTFTSource string `json:"ttftSource,omitempty"`
	// PeakPrefillThroughput is affinity.peakPrefillThroughput.
	PeakPrefillThroughput *float64 `json:"peakPrefillThroughput,omitempty"`
	// PrefixMatchInfoProducerName and InFlightLoadProducerName wire llm-d
	// plugins to each other; kvroute's filter always reads the Router's own
	// precise match and load, so any value is accepted.
	PrefixMatchInfoProducerName string `json:"prefixMatchInfoProducerName,omitempty"`
	InFlightLoadProducerName    string `json:"inFlightLoadProducerName,omitempty"`
}

// tokenLoadScorer is the parameters block of the llm-d router's
// token-load-scorer plugin.
type tokenLoadScorer struct {
	// QueueThresholdTokens is queueThresholdTokens; as in llm-d, a value
	// <= 0 means the default 4,194,304.
	QueueThresholdTokens *int64 `json:"queueThresholdTokens,omitempty"`
	// InFlightLoadProducerName is accepted as in the filter.
	InFlightLoadProducerName string `json:"inFlightLoadProducerName,omitempty"`
}
