package kvroute

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/kvroute/kvroute/tokenload"
)

// LLMDPrecisePrefixCacheProducer is the parameters block of the llm-d
// router's precise-prefix-cache-producer plugin, as far as kvroute has the
// same settings. Keys kvroute has no equivalent for (indexerConfig, hashSeed,
// hashAlgorithm, engineType, podNamespace, ...) are unknown keys, an error.
type LLMDPrecisePrefixCacheProducer struct {
	// TokenProcessorConfig holds the block size.
	TokenProcessorConfig *LLMDTokenProcessorConfig `json:"tokenProcessorConfig,omitempty"`
	// KVEventsConfig holds the event subscription settings.
	KVEventsConfig *LLMDKVEventsConfig `json:"kvEventsConfig,omitempty"`
	// SpeculativeIndexing is speculative.enabled.
	SpeculativeIndexing *bool `json:"speculativeIndexing,omitempty"`
	// SpeculativeTTL is speculative.ttl, a Go duration string in both; as in
	// llm-d, a value <= 0 means 2 s.
	SpeculativeTTL *time.Duration `json:"speculativeTTL,omitempty"`
}

// LLMDTokenProcessorConfig is the producer's tokenProcessorConfig.
type LLMDTokenProcessorConfig struct {
	// BlockSizeTokens is blockSize.
	BlockSizeTokens int `json:"blockSizeTokens,omitempty"`
	// BlockSize is llm-d's deprecated alias of BlockSizeTokens.
	BlockSize int `json:"blockSize,omitempty"`
}

// LLMDKVEventsConfig is the producer's kvEventsConfig.
type LLMDKVEventsConfig struct {
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
	PodDiscoveryConfig *LLMDPodDiscoveryConfig `json:"podDiscoveryConfig,omitempty"`
}

// LLMDPodDiscoveryConfig is the producer's kvEventsConfig.podDiscoveryConfig.
type LLMDPodDiscoveryConfig struct {
	// PodLabelSelector is events.selector, matched against Endpoint.Labels.
	PodLabelSelector string `json:"podLabelSelector,omitempty"`
	// SocketPort is events.eventsPort.
	SocketPort int `json:"socketPort,omitempty"`
	// ReplaySocketPort is events.replayPort; as in llm-d, a block without a
	// positive replaySocketPort turns replay off (events.replay false).
	ReplaySocketPort int `json:"replaySocketPort,omitempty"`
}

// LLMDPrefixCacheAffinityFilter is the parameters block of the llm-d
// router's prefix-cache-affinity-filter plugin.
type LLMDPrefixCacheAffinityFilter struct {
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

// LLMDTokenLoadScorer is the parameters block of the llm-d router's
// token-load-scorer plugin.
type LLMDTokenLoadScorer struct {
	// QueueThresholdTokens is queueThresholdTokens; as in llm-d, a value
	// <= 0 means the default 4,194,304.
	QueueThresholdTokens *int64 `json:"queueThresholdTokens,omitempty"`
	// InFlightLoadProducerName is accepted as in the filter.
	InFlightLoadProducerName string `json:"inFlightLoadProducerName,omitempty"`
}

// llmdSetting is one translated setting: the llm-d key path, the kvroute key
// path it sets, and the assignment.
type llmdSetting struct {
	from, to string
	set      func(c *Config)
}

// applyLLMD translates the llm-d blocks decoded into c (data is the JSON they
// came from, to see which kvroute keys it also set) and clears them.
func (c *Config) applyLLMD(data []byte) error {
	p, f, s := c.PrecisePrefixCacheProducer, c.PrefixCacheAffinityFilter, c.TokenLoadScorer
	c.PrecisePrefixCacheProducer, c.PrefixCacheAffinityFilter, c.TokenLoadScorer = nil, nil, nil
	if p == nil && f == nil && s == nil {
		return nil
	}
	var top map[string]any
	if err := json.Unmarshal(data, &top); err != nil {
		return err
	}
	var sets []llmdSetting
	add := func(from, to string, set func(c *Config)) { sets = append(sets, llmdSetting{from, to, set}) }
	const pp, af, tl = "precise-prefix-cache-producer", "prefix-cache-affinity-filter", "token-load-scorer"
	if p != nil {
		if t := p.TokenProcessorConfig; t != nil {
			if t.BlockSizeTokens != 0 && t.BlockSize != 0 && t.BlockSizeTokens != t.BlockSize {
				return fmt.Errorf("%w: %s.tokenProcessorConfig.blockSizeTokens %d conflicts with its deprecated alias blockSize %d", ErrInvalidConfig, pp, t.BlockSizeTokens, t.BlockSize)
			}
			if n := max(t.BlockSizeTokens, t.BlockSize); n != 0 {
				from := pp + ".tokenProcessorConfig.blockSizeTokens"
				if t.BlockSizeTokens == 0 {
					from = pp + ".tokenProcessorConfig.blockSize"
				}
				add(from, "blockSize", func(c *Config) { c.BlockSize = n })
			}
		}
		if e := p.KVEventsConfig; e != nil {
			const k = pp + ".kvEventsConfig."
			if e.ZMQEndpoint != "" {
				add(k+"zmqEndpoint", "events.bindAddress", func(c *Config) { c.Events.BindAddress = e.ZMQEndpoint })
			}
			if e.TopicFilter != nil {
				add(k+"topicFilter", "events.topicFilter", func(c *Config) { c.Events.TopicFilter = *e.TopicFilter })
			}
			if e.Concurrency != 0 {
				add(k+"concurrency", "events.concurrency", func(c *Config) { c.Events.Concurrency = e.Concurrency })
			}
			if e.DiscoverPods != nil && !*e.DiscoverPods && e.ZMQEndpoint == "" {
				add(k+"discoverPods", "events.enabled", func(c *Config) { c.Events.Enabled = false })
			}
			if d := e.PodDiscoveryConfig; d != nil {
				const k = pp + ".kvEventsConfig.podDiscoveryConfig."
				if d.PodLabelSelector != "" {
					add(k+"podLabelSelector", "events.selector", func(c *Config) { c.Events.Selector = d.PodLabelSelector })
				}
				if d.SocketPort != 0 {
					add(k+"socketPort", "events.eventsPort", func(c *Config) { c.Events.EventsPort = d.SocketPort })
				}
				add(k+"replaySocketPort", "events.replay", func(c *Config) { c.Events.Replay = d.ReplaySocketPort > 0 })
				if d.ReplaySocketPort > 0 {
					add(k+"replaySocketPort", "events.replayPort", func(c *Config) { c.Events.ReplayPort = d.ReplaySocketPort })
				}
			}
		}
		if p.SpeculativeIndexing != nil {
			add(pp+".speculativeIndexing", "speculative.enabled", func(c *Config) { c.Speculative.Enabled = *p.SpeculativeIndexing })
		}
		if p.SpeculativeTTL != nil {
			ttl := *p.SpeculativeTTL
			if ttl <= 0 {
				ttl = DefaultSpeculativeTTL
			}
			add(pp+".speculativeTTL", "speculative.ttl", func(c *Config) { c.Speculative.TTL = ttl })
		}
	}
	if f != nil {
		switch f.TTFTSource {
		case "", "prefillThroughput":
		default:
			return fmt.Errorf("%w: %s.ttftSource %q: kvroute estimates TTFT from in-flight tokens only (\"prefillThroughput\")", ErrInvalidConfig, af, f.TTFTSource)
		}
		if f.AffinityThreshold != nil {
			add(af+".affinityThreshold", "affinity.affinityThreshold", func(c *Config) { c.Affinity.AffinityThreshold = *f.AffinityThreshold })
		}
		if f.ExplorationProbability != nil {
			add(af+".explorationProbability", "affinity.explorationProbability", func(c *Config) { c.Affinity.ExplorationProbability = *f.ExplorationProbability })
		}
		if f.MaxTTFTPenaltyMs != nil {
			ms := *f.MaxTTFTPenaltyMs
			ns := ms * float64(time.Millisecond)
			if math.IsNaN(ns) || ns < 0 || ns >= math.MaxInt64 {
				return fmt.Errorf("%w: %s.maxTTFTPenaltyMs %v is out of range", ErrInvalidConfig, af, ms)
			}
			add(af+".maxTTFTPenaltyMs", "affinity.maxTTFTPenalty", func(c *Config) { c.Affinity.MaxTTFTPenalty = time.Duration(math.Round(ns)) })
		}
		if f.PeakPrefillThroughput != nil {
			add(af+".peakPrefillThroughput", "affinity.peakPrefillThroughput", func(c *Config) { c.Affinity.PeakPrefillThroughput = *f.PeakPrefillThroughput })
		}
	}
	if s != nil && s.QueueThresholdTokens != nil {
		q := *s.QueueThresholdTokens
		if q <= 0 {
			q = tokenload.DefaultQueueThresholdTokens
		}
		add(tl+".queueThresholdTokens", "queueThresholdTokens", func(c *Config) { c.QueueThresholdTokens = q })
	}
	setBy := map[string]string{}
	for _, st := range sets {
		if has(top, st.to) {
			return fmt.Errorf("%w: %s and %s set the same setting; keep one", ErrInvalidConfig, st.from, st.to)
		}
		if other, ok := setBy[st.to]; ok && other != st.from {
			return fmt.Errorf("%w: %s and %s set the same setting (%s); keep one", ErrInvalidConfig, other, st.from, st.to)
		}
		setBy[st.to] = st.from
		st.set(c)
	}
	return nil
}

// has reports whether the decoded JSON object top holds the dotted key path;
// "events." keys are inline in the events object.
func has(top map[string]any, path string) bool {
	var cur any = top
	for k := range strings.SplitSeq(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[k]; !ok {
			return false
		}
	}
	return true
}
