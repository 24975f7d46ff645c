package llmd_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/llmd"
)

// An llm-d configuration's plugin parameters blocks, pasted as they are.
const llmdBlocks = `{
	"model": "Qwen/Qwen3-32B",
	"precise-prefix-cache-producer": {
		"tokenProcessorConfig": {"blockSizeTokens": 16},
		"kvEventsConfig": {
			"topicFilter": "kv@",
			"concurrency": 8,
			"discoverPods": true,
			"podDiscoveryConfig": {"socketPort": 5557, "replaySocketPort": 5558}
		},
		"speculativeIndexing": true,
		"speculativeTTL": "3s"
	},
	"prefix-cache-affinity-filter": {
		"affinityThreshold": 0.7,
		"explorationProbability": 0.01,
		"maxTTFTPenaltyMs": 12000,
		"ttftSource": "prefillThroughput",
		"peakPrefillThroughput": 20000,
		"prefixMatchInfoProducerName": "precise-prefix-cache-producer"
	},
	"token-load-scorer": {"queueThresholdTokens": 1048576}
}`

func TestTranslateAcceptsLLMDKeyNames(t *testing.T) {
	cfg, err := llmd.Translate(strings.NewReader(llmdBlocks))
	require.NoError(t, err)
	require.Equal(t, 16, cfg.BlockSize)
	require.Equal(t, "kv@", *cfg.Events.TopicFilter)
	require.Equal(t, 8, cfg.Events.Concurrency)
	require.True(t, *cfg.Events.Enabled)
	require.Equal(t, 5557, cfg.Events.EventsPort)
	require.True(t, *cfg.Events.Replay)
	require.Equal(t, 5558, cfg.Events.ReplayPort)
	require.True(t, *cfg.Speculative.Enabled)
	require.Equal(t, 3*time.Second, cfg.Speculative.TTL)
	require.Equal(t, 0.7, *cfg.Affinity.AffinityThreshold)
	require.Equal(t, 0.01, cfg.Affinity.ExplorationProbability)
	require.Equal(t, 12*time.Second, *cfg.Affinity.MaxTTFTPenalty)
	require.Equal(t, 20000.0, cfg.Affinity.PeakPrefillThroughput)
	require.EqualValues(t, 1048576, cfg.QueueThresholdTokens)

	// The translated configuration marshals in kvroute's own keys and reads back.
	data, err := json.Marshal(cfg)
	require.NoError(t, err)
	require.NotContains(t, string(data), "maxTTFTPenaltyMs")
	back, err := kvroute.LoadConfig(bytes.NewReader(data))
	require.NoError(t, err)
	require.Equal(t, cfg, back)

	// Global-socket mode, llm-d's defaults for replay (off) and the deprecated
	// blockSize alias.
	cfg, err = llmd.Translate(strings.NewReader(`{"precise-prefix-cache-producer": {
		"tokenProcessorConfig": {"blockSize": 64},
		"kvEventsConfig": {"zmqEndpoint": "tcp://*:5557", "discoverPods": false, "podDiscoveryConfig": {}}}}`))
	require.NoError(t, err)
	require.Equal(t, "tcp://*:5557", cfg.Events.BindAddress)
	require.True(t, *cfg.Events.Enabled)
	require.False(t, *cfg.Events.Replay)
	require.Equal(t, 64, cfg.BlockSize)

	cfg, err = llmd.Translate(strings.NewReader(`{"precise-prefix-cache-producer": {"kvEventsConfig": {"discoverPods": false}},
		"token-load-scorer": {"queueThresholdTokens": 0}, "prefix-cache-affinity-filter": {"maxTTFTPenaltyMs": 0}}`))
	require.NoError(t, err)
	require.False(t, *cfg.Events.Enabled, "no pods and no zmqEndpoint subscribes to nothing")
	require.EqualValues(t, 4194304, cfg.QueueThresholdTokens, "<= 0 means the default, as in llm-d")
	require.Zero(t, *cfg.Affinity.MaxTTFTPenalty)
}

func TestTranslateConflictsAndUnsupportedKeys(t *testing.T) {
	for in, want := range map[string]string{
		`{"blockSize":64,"precise-prefix-cache-producer":{"tokenProcessorConfig":{"blockSizeTokens":16}}}`:          "precise-prefix-cache-producer.tokenProcessorConfig.blockSizeTokens and blockSize set the same setting",
		`{"speculative":{"ttl":"2s"},"precise-prefix-cache-producer":{"speculativeTTL":"3s"}}`:                      "precise-prefix-cache-producer.speculativeTTL and speculative.ttl set the same setting",
		`{"affinity":{"maxTTFTPenalty":"18s"},"prefix-cache-affinity-filter":{"maxTTFTPenaltyMs":5000}}`:            "prefix-cache-affinity-filter.maxTTFTPenaltyMs and affinity.maxTTFTPenalty set the same setting",
		`{"events":{"topicFilter":"kv@"},"precise-prefix-cache-producer":{"kvEventsConfig":{"topicFilter":"kv@"}}}`: "precise-prefix-cache-producer.kvEventsConfig.topicFilter and events.topicFilter",
		`{"queueThresholdTokens":5,"token-load-scorer":{"queueThresholdTokens":6}}`:                                 "token-load-scorer.queueThresholdTokens and queueThresholdTokens",
		`{"precise-prefix-cache-producer":{"indexerConfg":{}}}`:                                                     "precise-prefix-cache-producer.indexerConfg: unknown key",
		`{"precise-prefix-cache-producer":{"indexerConfig":{"kvBlockIndexConfig":{}}}}`:                             "strict: 1 llm-d settings are not carried over:\n\tprecise-prefix-cache-producer.indexerConfig.kvBlockIndexConfig: kvroute does this differently (",
		`{"precise-prefix-cache-producer":{"speculativeTTL":2000}}`:                                                 "precise-prefix-cache-producer.speculativeTTL: bare number",
		`{"prefix-cache-affinity-filter":{"ttftSource":"latencyPredictor"}}`:                                        "prefix-cache-affinity-filter.ttftSource: no equivalent",
		`{"prefix-cache-affinity-filter":{"maxInFlightRequestsDelta":2}}`:                                           "prefix-cache-affinity-filter.maxInFlightRequestsDelta: kvroute does this differently",
		`{"token-producer":{"modelName":"a"},"model":"b"}`:                                                          "token-producer.modelName and model set the same setting",
		`{"prefix-cache-affinity-filter":{"affinityThreshold":2}}`:                                                  "affinityThreshold must be in [0, 1]",
	} {
		_, err := llmd.Translate(strings.NewReader(in))
		require.ErrorIs(t, err, kvroute.ErrInvalidConfig, in)
		require.ErrorContains(t, err, want, in)
	}
}

// A document without llm-d blocks reads exactly as kvroute.LoadConfig reads
// it: the same Config, or the same error.
func TestTranslateWithoutBlocksIsLoadConfig(t *testing.T) {
	for _, in := range []string{
		`{}`, `null`, `[]`, `{"model":"m","blockSize":16,"speculative":{"ttl":"3s"}}`,
		`{"speculative":{"ttl":2000}}`, `{"speculative":{"ttlx":"2s"}}`, `{"model":"a","model":"b"}`,
		`{"index":{"blockSize":16}}`, `{"Model":"m"}`, `{"blockSize":"64"}`, `{"model":"m"} trailing`, `{`,
		`{"checkpoint":{"interval":"1m"},"bootstrap":{"peers":["http://p:9091/kvroute/snapshot"]}}`,
	} {
		want, wantErr := kvroute.LoadConfig(strings.NewReader(in))
		got, err := llmd.Translate(strings.NewReader(in))
		if wantErr != nil {
			require.EqualError(t, err, wantErr.Error(), in)
			require.ErrorIs(t, err, kvroute.ErrInvalidConfig, in)
			continue
		}
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
}

// The first error of a document is reported in document order, whichever
// part (kvroute's keys or an llm-d block) holds it; the block size a block
// sets is the top-level one, which index.blockSize may not repeat; and a
// block given twice is an error.
func TestTranslateReadsTheDocumentAsOne(t *testing.T) {
	_, err := llmd.Translate(strings.NewReader(`{"speculative":{"tll":"2s"},"precise-prefix-cache-producer":{"indexerConfg":{}}}`))
	require.ErrorContains(t, err, "speculative.tll: unknown key")
	_, err = llmd.Translate(strings.NewReader(`{"precise-prefix-cache-producer":{"indexerConfg":{}},"speculative":{"tll":"2s"}}`))
	require.ErrorContains(t, err, "precise-prefix-cache-producer.indexerConfg: unknown key")

	cfg, err := llmd.Translate(strings.NewReader(`{"precise-prefix-cache-producer":{"tokenProcessorConfig":{"blockSizeTokens":16}}}`))
	require.NoError(t, err)
	require.Equal(t, 16, cfg.BlockSize)
	_, err = llmd.Translate(strings.NewReader(`{"index":{"blockSize":16},"precise-prefix-cache-producer":{"tokenProcessorConfig":{"blockSizeTokens":16}}}`))
	require.ErrorContains(t, err, `index.blockSize: set once, by the top-level "blockSize"`)

	_, err = llmd.Translate(strings.NewReader(`{"token-load-scorer":{},"model":"m","token-load-scorer":{}}`))
	require.ErrorIs(t, err, kvroute.ErrInvalidConfig)
	require.ErrorContains(t, err, "token-load-scorer: key given twice")

	// kvroute.LoadConfig itself no longer knows the llm-d blocks.
	_, err = kvroute.LoadConfig(strings.NewReader(llmdBlocks))
	require.ErrorContains(t, err, "precise-prefix-cache-producer: unknown key")
}

// A YAML stream of more than one document is refused, as the gateway
// refuses it: only the first was read, so the settings after a "---" (an
// unknown key, a malformed value, a plugin's parameters) were dropped
// without a word. Empty documents (a leading or trailing "---") do not
// count.
func TestLoadRefusesSeveralDocuments(t *testing.T) {
	for _, in := range []string{
		"model: m\n---\nbogus: 1\n",
		"model: m\n---\nblockSize: 16\n",
		"model: m\n---\nblockSize: [unclosed\n",
		"apiVersion: inference.networking.x-k8s.io/v1alpha1\nkind: EndpointPickerConfig\n---\nmodel: m\n",
	} {
		_, _, err := llmd.Load(strings.NewReader(in), llmd.Options{})
		require.ErrorIs(t, err, kvroute.ErrInvalidConfig, in)
		_, err = llmd.LoadResult(strings.NewReader(in), llmd.Options{})
		require.Error(t, err, in)
	}
	_, _, err := llmd.Load(strings.NewReader("model: m\n---\nbogus: 1\n"), llmd.Options{})
	require.ErrorContains(t, err, "more than one document")
	cfg, _, err := llmd.Load(strings.NewReader("---\nmodel: m\nblockSize: 16\n---\n"), llmd.Options{})
	require.NoError(t, err)
	require.Equal(t, 16, cfg.BlockSize)
}

// The parameters block of an llm-d plugin that configures a stage beside
// the router (P/D, session affinity, LoRA affinity) is refused in a
// kvroute configuration, which has no scheduling profiles to weigh a
// scorer or wire a decider: the error names the EndpointPickerConfig and
// the kvroute-epp flag that configure the stage, in document order.
func TestTranslateStagePluginBlocks(t *testing.T) {
	for in, flag := range map[string]string{
		"model: m\ndisagg-profile-handler:\n  deciders: {prefill: prefix-based-pd-decider}\n":              "--disagg-config",
		"model: m\nprefix-based-pd-decider:\n  nonCachedTokens: 256\n":                                     "--disagg-config",
		"session-affinity-scorer:\n  strategy: session_id\n  sessionIdConfig: {evictionTtlSeconds: 600}\n": "--session-config",
		"session-id-producer: {headerName: x-session-id}\n":                                                "--session-config",
		"lora-affinity-scorer: {}\nmodel: m\n":                                                             "--lora-config",
	} {
		_, _, err := llmd.Load(strings.NewReader(in), llmd.Options{})
		require.ErrorIs(t, err, kvroute.ErrInvalidConfig, in)
		require.ErrorContains(t, err, "configures a stage beside the router", in)
		require.ErrorContains(t, err, "EndpointPickerConfig", in)
		require.ErrorContains(t, err, "kvroute-epp "+flag, in)
	}
	_, err := llmd.Translate(strings.NewReader(`{"speculative":{"tll":"2s"},"session-affinity-scorer":{}}`))
	require.ErrorContains(t, err, "speculative.tll: unknown key")
	_, err = llmd.Translate(strings.NewReader(`{"session-affinity-scorer":{},"speculative":{"tll":"2s"}}`))
	require.ErrorContains(t, err, "session-affinity-scorer: llm-d's session-affinity-scorer configures a stage")
	_, err = llmd.Translate(strings.NewReader(`{"events":{"lora-affinity-scorer":{}}}`))
	require.ErrorContains(t, err, "events.lora-affinity-scorer: unknown key")
}
