package llmd

import (
	"encoding/json"
	"time"

	"github.com/kvroute/kvroute/render"
)

// plugins are the parameters blocks of the llm-d router's plugins that
// kvroute has settings for, each under its plugin type name, as they may
// appear at the top level of a kvroute configuration document (or, from an
// EndpointPickerConfig, one per plugin kvroute implements).
type plugins struct {
	PrecisePrefixCacheProducer *precisePrefixCacheProducer `json:"precise-prefix-cache-producer,omitempty"`
	PrefixCacheAffinityFilter  *prefixCacheAffinityFilter  `json:"prefix-cache-affinity-filter,omitempty"`
	TokenLoadScorer            *tokenLoadScorer            `json:"token-load-scorer,omitempty"`
	TokenProducer              *tokenProducer              `json:"token-producer,omitempty"`
	InFlightLoadProducer       *inFlightLoadProducer       `json:"inflight-load-producer,omitempty"`
}

// The plugin type names kvroute translates, the keys of plugins. The
// deprecated precise-prefix-cache-scorer takes the producer's parameters,
// and the legacy tokenizer the token producer's.
const (
	pp       = "precise-prefix-cache-producer"
	ppScorer = "precise-prefix-cache-scorer"
	af       = "prefix-cache-affinity-filter"
	tl       = "token-load-scorer"
	tp       = "token-producer"
	tpLegacy = "tokenizer"
	il       = "inflight-load-producer"
)

// Notes shared by several findings.
const (
	noteRender = "kvroute tokenizes through vLLM's render endpoints: render.url, or the routed endpoints themselves"
	noteLoad   = "kvroute's token-load scorer ranks endpoints by the tokens each has in flight, counted by kvroute itself, less the request's cached prefix"
)

// precisePrefixCacheProducer is the parameters block of the llm-d router's
// precise-prefix-cache-producer plugin (and of the deprecated
// precise-prefix-cache-scorer). Fields tagged `finding` are llm-d settings
// kvroute knows and does not translate.
type precisePrefixCacheProducer struct {
	// TokenProcessorConfig holds the block size.
	TokenProcessorConfig *tokenProcessorConfig `json:"tokenProcessorConfig,omitempty"`
	// IndexerConfig configures llm-d's index; kvroute's is configured by
	// its own keys.
	IndexerConfig *indexerConfig `json:"indexerConfig,omitempty"`
	// KVEventsConfig holds the event subscription settings.
	KVEventsConfig *kvEventsConfig `json:"kvEventsConfig,omitempty"`
	// SpeculativeIndexing is speculative.enabled.
	SpeculativeIndexing *bool `json:"speculativeIndexing,omitempty"`
	// SpeculativeTTL is speculative.ttl, a Go duration string in both; as in
	// llm-d, a value <= 0 means 2 s, and so does "" (llm-d's field is a
	// string whose empty value is the default).
	SpeculativeTTL *time.Duration `json:"speculativeTTL,omitempty" jsonconf:"emptyunset"`
}

// tokenProcessorConfig is the producer's tokenProcessorConfig.
type tokenProcessorConfig struct {
	// BlockSizeTokens is blockSize.
	BlockSizeTokens int `json:"blockSizeTokens,omitempty"`
	// BlockSize is llm-d's deprecated alias of BlockSizeTokens, which wins
	// when both are set.
	BlockSize int `json:"blockSize,omitempty"`
	// HashSeed seeds llm-d's own block-key chain. kvroute's keys have no
	// seed and never reproduce an engine's hashes, so no seed of the
	// engines (vLLM's PYTHONHASHSEED) changes them.
	HashSeed json.RawMessage `json:"hashSeed,omitempty" finding:"unneeded:kvroute keys blocks from their token IDs under a fixed root, the model or LoRA name, and maps each engine's own block hashes per endpoint without recomputing them, so whatever seed the engines hash with (vLLM's PYTHONHASHSEED) needs no setting and changes no kvroute key"`
	// HashAlgorithm selects llm-d's block-key hash.
	HashAlgorithm json.RawMessage `json:"hashAlgorithm,omitempty" finding:"unneeded:kvroute's block keys are always its chained XXH3-64 keys (key scheme v2); engine hashes of any algorithm are mapped, never recomputed"`
}

// indexerConfig is the producer's indexerConfig: llm-d's index, whose
// parts kvroute configures with its own keys.
type indexerConfig struct {
	KVBlockIndexConfig    json.RawMessage `json:"kvBlockIndexConfig,omitempty" finding:"different:kvroute keeps one in-memory index bounded by index.maxBytes and index.maxBlocksPerEndpoint, and always registers its metrics"`
	KVCacheBackendConfigs json.RawMessage `json:"kvCacheBackendConfigs,omitempty" finding:"different:the weight of each cache tier is index.tierWeights"`
	TokenizersPoolConfig  json.RawMessage `json:"tokenizersPoolConfig,omitempty" finding:"different:kvroute tokenizes through vLLM's render endpoints: render.url, or the routed endpoints themselves"`
	PrefixStoreConfig     json.RawMessage `json:"prefixStoreConfig,omitempty" finding:"unneeded:kvroute does not cache tokenizations; the render endpoints tokenize every request"`
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
	// EngineType ("vllm" or "sglang") is events.engine.
	EngineType string `json:"engineType,omitempty"`
	// DiscoverPods false with no zmqEndpoint subscribes to nothing in llm-d,
	// so it means events.enabled false. True is kvroute's per-endpoint
	// subscriptions to the endpoints given to SetEndpoints.
	DiscoverPods *bool `json:"discoverPods,omitempty"`
	// PodDiscoveryConfig holds the per-endpoint ports and the selector.
	PodDiscoveryConfig *podDiscoveryConfig `json:"podDiscoveryConfig,omitempty"`
	// Tracing turns the KV-event spans on: events.tracing.enabled (kvroute
	// samples one message in 100 per endpoint unless
	// events.tracing.sampleRatio says otherwise).
	Tracing *bool `json:"tracing,omitempty"`
	// MaxQueueDepth bounded an older llm-d's event queues.
	MaxQueueDepth json.RawMessage `json:"maxQueueDepth,omitempty" finding:"different:events.queueSize and events.queueBytes bound kvroute's event queues"`
}

// podDiscoveryConfig is the producer's kvEventsConfig.podDiscoveryConfig.
type podDiscoveryConfig struct {
	// PodLabelSelector selected the pods an older llm-d's own pod watch
	// subscribed to; llm-d's picker now subscribes to every endpoint its
	// endpoint-notification-source reports and reads it no more.
	PodLabelSelector json.RawMessage `json:"podLabelSelector,omitempty" finding:"unneeded:llm-d's picker subscribes to every endpoint its endpoint-notification-source reports, whatever the selector, and kvroute to every endpoint it routes to (events.selector narrows them in a kvroute configuration)"`
	// SocketPort is events.eventsPort.
	SocketPort int `json:"socketPort,omitempty"`
	// ReplaySocketPort is events.replayPort; as in llm-d, a block without a
	// positive replaySocketPort turns replay off (events.replay false).
	ReplaySocketPort int `json:"replaySocketPort,omitempty"`
	// SnapshotSocketPort is events.snapshot.port; a positive one turns
	// engine snapshots on (events.snapshot.enabled), as in llm-d's
	// snapshot recovery (the engine's kv-events-config snapshot_endpoint).
	SnapshotSocketPort int `json:"snapshotSocketPort,omitempty"`
	// DataParallelSize is accepted and ignored by llm-d, which learns the
	// ranks from the events.
	DataParallelSize json.RawMessage `json:"dataParallelSize,omitempty" finding:"unneeded:llm-d ignores it too; kvroute takes an endpoint's data-parallel rank from its place among the pool's target ports"`
	// RankPodMapping maps the ranks of one serving endpoint to the pods
	// that publish their events.
	RankPodMapping json.RawMessage `json:"rankPodMapping,omitempty" finding:"none:kvroute subscribes to each endpoint's own pod; ranks published by other pods are not read"`
	// PodNamespace limits llm-d's own pod watch.
	PodNamespace json.RawMessage `json:"podNamespace,omitempty" finding:"different:kvroute subscribes to the endpoints it routes to; kvroute-epp's --pool-namespace names their namespace"`
}

// prefixCacheAffinityFilter is the parameters block of the llm-d router's
// prefix-cache-affinity-filter plugin.
type prefixCacheAffinityFilter struct {
	// AffinityThreshold is affinity.affinityThreshold; as in llm-d, a value
	// <= 0 turns the filter off (kvroute's 0).
	AffinityThreshold *float64 `json:"affinityThreshold,omitempty"`
	// ExplorationProbability is affinity.explorationProbability.
	ExplorationProbability *float64 `json:"explorationProbability,omitempty"`
	// MaxTTFTPenaltyMs is affinity.maxTTFTPenalty in milliseconds (the key
	// names the unit, so a number is unambiguous here).
	MaxTTFTPenaltyMs *float64 `json:"maxTTFTPenaltyMs,omitempty"`
	// TTFTSource "prefillThroughput" (or empty) is kvroute's gate; another
	// source is a finding: kvroute has no latency predictor.
	TTFTSource string `json:"ttftSource,omitempty"`
	// PeakPrefillThroughput is affinity.peakPrefillThroughput.
	PeakPrefillThroughput *float64 `json:"peakPrefillThroughput,omitempty"`
	// PrefixMatchInfoProducerName and InFlightLoadProducerName wire llm-d
	// plugins to each other; kvroute's filter always reads the Router's own
	// precise match and load (see wiring).
	PrefixMatchInfoProducerName string `json:"prefixMatchInfoProducerName,omitempty"`
	InFlightLoadProducerName    string `json:"inFlightLoadProducerName,omitempty"`
	// LatencyPredictionInfoProducerName names llm-d's latency predictor.
	LatencyPredictionInfoProducerName json.RawMessage `json:"latencyPredictionInfoProducerName,omitempty" finding:"none:kvroute has no latency predictor; its gate estimates TTFT from prefill throughput"`
	// MaxInFlightRequestsDelta was an older llm-d's request-count gate.
	MaxInFlightRequestsDelta json.RawMessage `json:"maxInFlightRequestsDelta,omitempty" finding:"different:kvroute's gate weighs in-flight tokens against affinity.maxTTFTPenalty, not request counts"`
}

// tokenLoadScorer is the parameters block of the llm-d router's
// token-load-scorer plugin.
type tokenLoadScorer struct {
	// QueueThresholdTokens is queueThresholdTokens; as in llm-d, a value
	// <= 0 means the default 4,194,304.
	QueueThresholdTokens *int64 `json:"queueThresholdTokens,omitempty"`
	// InFlightLoadProducerName is wiring, as in the filter.
	InFlightLoadProducerName string `json:"inFlightLoadProducerName,omitempty"`
	// NonTextTokenWeight weighed an older llm-d's non-text tokens.
	NonTextTokenWeight json.RawMessage `json:"nonTextTokenWeight,omitempty" finding:"none:kvroute counts every rendered prompt token alike"`
}

// tokenProducer is the parameters block of the llm-d router's
// token-producer plugin (and of the legacy tokenizer plugin).
type tokenProducer struct {
	// ModelName is model.
	ModelName string `json:"modelName,omitempty"`
	// VLLM selects rendering through vLLM's render endpoints.
	VLLM *vllmRender `json:"vllm,omitempty"`
	// UDSTokenizerConfig selects llm-d's tokenizer sidecar.
	UDSTokenizerConfig json.RawMessage `json:"udsTokenizerConfig,omitempty" finding:"different:kvroute tokenizes through vLLM's render endpoints: render.url, or the routed endpoints themselves"`
	// Estimate selects llm-d's tokenizer-free estimate.
	Estimate json.RawMessage `json:"estimate,omitempty" finding:"different:kvroute renders or, with disableRender, routes by load alone; it does not estimate tokens"`
}

// vllmRender is the token producer's vllm block.
type vllmRender struct {
	// URL is render.url. Absent (and without EndpointDiscovery), llm-d
	// renders on http://localhost:8000; kvroute renders on the routed
	// endpoints (a finding says so).
	URL string `json:"url,omitempty"`
	// EndpointDiscovery renders on the pool's Ready endpoints, round robin
	// with one retry on another, as kvroute does without render.url; llm-d
	// refuses it beside URL.
	EndpointDiscovery *endpointDiscovery `json:"endpointDiscovery,omitempty"`
	// Timeout is render.timeout; "" leaves kvroute's default, as llm-d's
	// empty string does its own.
	Timeout *time.Duration `json:"timeout,omitempty" jsonconf:"emptyunset"`
	// MMTimeout is render.mmTimeout; "" leaves kvroute's default.
	MMTimeout *time.Duration `json:"mmTimeout,omitempty" jsonconf:"emptyunset"`
	// MessagesRenderMode and ResponsesRenderMode are render's keys of the
	// same names ("auto", "native" or "legacy"; "" leaves auto).
	MessagesRenderMode  render.Mode `json:"messagesRenderMode,omitempty"`
	ResponsesRenderMode render.Mode `json:"responsesRenderMode,omitempty"`
	// PrefillOnly and OmitMMKwargs are render's keys of the same names.
	PrefillOnly  *bool `json:"prefillOnly,omitempty"`
	OmitMMKwargs *bool `json:"omitMMKwargs,omitempty"`
	// The renderer's TLS settings.
	CACertPath         json.RawMessage `json:"caCertPath,omitempty" finding:"none:kvroute verifies an https render url against the system roots; it has no CA file, client certificate or skip-verify setting"`
	ClientCertPath     json.RawMessage `json:"clientCertPath,omitempty" finding:"none:kvroute verifies an https render url against the system roots; it has no CA file, client certificate or skip-verify setting"`
	ClientKeyPath      json.RawMessage `json:"clientKeyPath,omitempty" finding:"none:kvroute verifies an https render url against the system roots; it has no CA file, client certificate or skip-verify setting"`
	InsecureSkipVerify json.RawMessage `json:"insecureSkipVerify,omitempty" finding:"none:kvroute verifies an https render url against the system roots; it has no CA file, client certificate or skip-verify setting"`
}

// endpointDiscovery is the token producer's vllm.endpointDiscovery block.
type endpointDiscovery struct {
	// AttemptTimeout is render.attemptTimeout; llm-d refuses one that is
	// not positive, and "" leaves the default.
	AttemptTimeout *time.Duration `json:"attemptTimeout,omitempty" jsonconf:"emptyunset"`
	// LoadBalancer.Type may only be llm-d's one, round-robin, which is
	// kvroute's render rotation.
	LoadBalancer *struct {
		Type string `json:"type,omitempty"`
	} `json:"loadBalancer,omitempty"`
	DiscoverModelLimits json.RawMessage `json:"discoverModelLimits,omitempty" finding:"none:kvroute does not read the engines' context limits; a prompt over one is refused by the engine"`
	MinModelLen         json.RawMessage `json:"minModelLen,omitempty" finding:"none:kvroute does not read the engines' context limits; a prompt over one is refused by the engine"`
	ContextLimitLabel   json.RawMessage `json:"contextLimitLabel,omitempty" finding:"none:kvroute does not read the engines' context limits; a prompt over one is refused by the engine"`
	PortRules           json.RawMessage `json:"portRules,omitempty" finding:"none:kvroute renders on each endpoint's own address and port; a separate render pool is kvroute-epp's --render-selector"`
}

// inFlightLoadProducer is the parameters block of the llm-d router's
// inflight-load-producer plugin: in kvroute, the Router's own in-flight
// token accounting, always on.
type inFlightLoadProducer struct {
	// PrefixMatchInfoProducerName is wiring, as in the filter.
	PrefixMatchInfoProducerName string `json:"prefixMatchInfoProducerName,omitempty"`

	AddEstimatedOutputTokens json.RawMessage `json:"addEstimatedOutputTokens,omitempty" finding:"different:kvroute adds openRequestTokens of load per open request instead of estimated output tokens"`
	OutputRatio              json.RawMessage `json:"outputRatio,omitempty" finding:"different:kvroute adds openRequestTokens of load per open request instead of estimated output tokens"`
	MaxEstimatedOutputTokens json.RawMessage `json:"maxEstimatedOutputTokens,omitempty" finding:"different:kvroute adds openRequestTokens of load per open request instead of estimated output tokens"`
	SyncCrossReplicaState    json.RawMessage `json:"syncCrossReplicaState,omitempty" finding:"different:kvroute replicas share their in-flight load through Redis when cluster.addrs is set"`
}
