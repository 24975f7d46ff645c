package llmd

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/tokenload"
)

// setting is one translated setting: the llm-d key path, the kvroute key
// path it sets, and the assignment.
type setting struct {
	from, to string
	set      func(c *kvroute.Config)
}

// source says where the translated blocks came from, for the paths of
// errors and findings: each block's path by plugin type constant (pp, af,
// ...), and the token-load scorer's weight from a scheduling profile.
type source struct {
	path       map[string]string
	loadWeight *float64
	weightPath string
}

// at returns the path of plugin type k's parameters block.
func (s source) at(k string) string {
	if p, ok := s.path[k]; ok {
		return p
	}
	return k
}

// apply translates the blocks onto c and returns the findings of their
// settings kvroute does not translate. top is the rest of the document,
// decoded, to see which kvroute keys it also set: a setting given both
// ways, or by two llm-d keys, is an error naming both paths.
func (ps plugins) apply(c *kvroute.Config, top map[string]any, src source) ([]Finding, error) {
	p, f, s := ps.PrecisePrefixCacheProducer, ps.PrefixCacheAffinityFilter, ps.TokenLoadScorer
	var sets []setting
	var findings []Finding
	add := func(from, to string, set func(c *kvroute.Config)) { sets = append(sets, setting{from, to, set}) }
	if p != nil {
		at := src.at(pp)
		findings = append(findings, untranslated(p, at)...)
		if t := p.TokenProcessorConfig; t != nil {
			// As in llm-d's token processor, blockSizeTokens wins over its
			// deprecated alias whenever it is set.
			n, from := t.BlockSizeTokens, at+".tokenProcessorConfig.blockSizeTokens"
			switch {
			case n == 0:
				n, from = t.BlockSize, at+".tokenProcessorConfig.blockSize"
			case t.BlockSize != 0 && t.BlockSize != n:
				findings = append(findings, Finding{Path: at + ".tokenProcessorConfig.blockSize", Kind: NotNeeded,
					Note: fmt.Sprintf("llm-d's deprecated alias of blockSizeTokens, which is set and wins, in llm-d as in kvroute: blocks of %d tokens", n)})
			}
			if n != 0 {
				add(from, "blockSize", func(c *kvroute.Config) { c.BlockSize = n })
			}
		}
		if e := p.KVEventsConfig; e != nil {
			k := at + ".kvEventsConfig."
			if e.ZMQEndpoint != "" {
				add(k+"zmqEndpoint", "events.bindAddress", func(c *kvroute.Config) { c.Events.BindAddress = e.ZMQEndpoint })
			}
			if e.TopicFilter != nil {
				add(k+"topicFilter", "events.topicFilter", func(c *kvroute.Config) { c.Events.TopicFilter = new(*e.TopicFilter) })
			}
			if e.Concurrency != 0 {
				add(k+"concurrency", "events.concurrency", func(c *kvroute.Config) { c.Events.Concurrency = e.Concurrency })
			}
			if e.EngineType != "" {
				add(k+"engineType", "events.engine", func(c *kvroute.Config) { c.Events.Engine = kvevents.EngineKind(e.EngineType) })
			}
			if e.Tracing != nil {
				add(k+"tracing", "events.tracing.enabled", func(c *kvroute.Config) { c.Events.Tracing.Enabled = *e.Tracing })
			}
			if e.DiscoverPods != nil && !*e.DiscoverPods && e.ZMQEndpoint == "" {
				add(k+"discoverPods", "events.enabled", func(c *kvroute.Config) { c.Events.Enabled = new(false) })
			}
			if d := e.PodDiscoveryConfig; d != nil {
				k := k + "podDiscoveryConfig."
				if d.SocketPort != 0 {
					add(k+"socketPort", "events.eventsPort", func(c *kvroute.Config) { c.Events.EventsPort = d.SocketPort })
				}
				add(k+"replaySocketPort", "events.replay", func(c *kvroute.Config) { c.Events.Replay = new(d.ReplaySocketPort > 0) })
				if d.ReplaySocketPort > 0 {
					add(k+"replaySocketPort", "events.replayPort", func(c *kvroute.Config) { c.Events.ReplayPort = d.ReplaySocketPort })
				}
				if d.SnapshotSocketPort > 0 {
					add(k+"snapshotSocketPort", "events.snapshot", func(c *kvroute.Config) {
						c.Events.Snapshot.Enabled, c.Events.Snapshot.Port = true, d.SnapshotSocketPort
					})
				}
			}
		}
		if p.SpeculativeIndexing != nil {
			add(at+".speculativeIndexing", "speculative.enabled", func(c *kvroute.Config) { c.Speculative.Enabled = new(*p.SpeculativeIndexing) })
		}
		if p.SpeculativeTTL != nil {
			ttl := *p.SpeculativeTTL
			if ttl <= 0 {
				ttl = kvindex.DefaultSpeculativeTTL
			}
			add(at+".speculativeTTL", "speculative.ttl", func(c *kvroute.Config) { c.Speculative.TTL = ttl })
		}
	}
	if f != nil {
		at := src.at(af)
		findings = append(findings, untranslated(f, at)...)
		switch f.TTFTSource {
		case "", "prefillThroughput":
		default:
			findings = append(findings, Finding{Path: at + ".ttftSource", Kind: NoEquivalent,
				Note: fmt.Sprintf("kvroute has no %q source; its gate estimates TTFT from prefill throughput (prefillThroughput)", f.TTFTSource)})
		}
		if f.AffinityThreshold != nil {
			// llm-d's filter passes every endpoint at a threshold <= 0,
			// kvroute's at 0.
			th := max(*f.AffinityThreshold, 0)
			add(at+".affinityThreshold", "affinity.affinityThreshold", func(c *kvroute.Config) { c.Affinity.AffinityThreshold = new(th) })
		}
		if f.ExplorationProbability != nil {
			add(at+".explorationProbability", "affinity.explorationProbability", func(c *kvroute.Config) { c.Affinity.ExplorationProbability = *f.ExplorationProbability })
		}
		if f.MaxTTFTPenaltyMs != nil {
			ms := *f.MaxTTFTPenaltyMs
			ns := ms * float64(time.Millisecond)
			if math.IsNaN(ns) || ns < 0 || ns >= math.MaxInt64 {
				return nil, fmt.Errorf("%w: %s.maxTTFTPenaltyMs %v is out of range", kvroute.ErrInvalidConfig, at, ms)
			}
			add(at+".maxTTFTPenaltyMs", "affinity.maxTTFTPenalty", func(c *kvroute.Config) { c.Affinity.MaxTTFTPenalty = new(time.Duration(math.Round(ns))) })
		}
		if f.PeakPrefillThroughput != nil {
			add(at+".peakPrefillThroughput", "affinity.peakPrefillThroughput", func(c *kvroute.Config) { c.Affinity.PeakPrefillThroughput = *f.PeakPrefillThroughput })
		}
	}
	if s != nil {
		at := src.at(tl)
		findings = append(findings, untranslated(s, at)...)
		if s.QueueThresholdTokens != nil {
			q := *s.QueueThresholdTokens
			if q <= 0 {
				q = tokenload.DefaultQueueThresholdTokens
			}
			add(at+".queueThresholdTokens", "queueThresholdTokens", func(c *kvroute.Config) { c.QueueThresholdTokens = q })
		}
	}
	if w := src.loadWeight; w != nil {
		if *w < 0 || math.IsNaN(*w) {
			return nil, fmt.Errorf("%w: %s %v is negative: it is kvroute's loadWeight", kvroute.ErrInvalidConfig, src.weightPath, *w)
		}
		add(src.weightPath, "loadWeight", func(c *kvroute.Config) { c.LoadWeight = *w })
	}
	if t := ps.TokenProducer; t != nil {
		at := src.at(tp)
		findings = append(findings, untranslated(t, at)...)
		if t.ModelName != "" {
			add(at+".modelName", "model", func(c *kvroute.Config) { c.Model = t.ModelName })
		}
		// As in llm-d, vllm or modelName alone selects rendering on vLLM's
		// render endpoints, at http://localhost:8000 unless vllm.url is set.
		v := t.VLLM
		switch {
		case v != nil || present(t.UDSTokenizerConfig) || present(t.Estimate):
		case t.ModelName != "":
			v = &vllmRender{}
		default:
			// No backend at all is llm-d's estimate backend.
			findings = append(findings, Finding{Path: at, Kind: Different,
				Note: "without vllm, modelName or udsTokenizerConfig, llm-d estimates token counts without a tokenizer; kvroute renders (render.url, or the routed endpoints themselves) or, with disableRender, routes by load alone"})
		}
		if v != nil {
			vs, err := v.settings(at+".vllm", top)
			if err != nil {
				return nil, err
			}
			sets = append(sets, vs.sets...)
			findings = append(findings, vs.findings...)
		}
	}
	if l := ps.InFlightLoadProducer; l != nil {
		findings = append(findings, untranslated(l, src.at(il))...)
	}
	setBy := map[string]string{}
	for _, st := range sets {
		if has(top, st.to) {
			return nil, fmt.Errorf("%w: %s and %s set the same setting; keep one", kvroute.ErrInvalidConfig, st.from, st.to)
		}
		if other, ok := setBy[st.to]; ok && other != st.from {
			return nil, fmt.Errorf("%w: %s and %s set the same setting (%s); keep one", kvroute.ErrInvalidConfig, other, st.from, st.to)
		}
		setBy[st.to] = st.from
		st.set(c)
	}
	return findings, nil
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
