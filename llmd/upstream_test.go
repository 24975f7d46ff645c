package llmd_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/llmd"
)

// The top-level requestHandler (llm-d's place for the parsers, replacing
// parser) is read and reported like parser, not refused as unknown.
func TestPickerConfigRequestHandler(t *testing.T) {
	doc := epc("[{type: openai-parser}, {type: token-load-scorer}]", "") +
		"requestHandler:\n  parsers:\n    - pluginRef: openai-parser\n"
	_, findings := loadBoth(t, doc)
	requireFindings(t, findings,
		want{"plugins[openai-parser]", llmd.Different},
		want{"schedulingProfiles[default].plugins", llmd.Different},
		want{"requestHandler", llmd.Different},
		want{"plugins", llmd.Different},
	)
}

// llm-d's token processor takes blockSizeTokens when both it and its
// deprecated alias blockSize are set; the alias is then ignored, which
// kvroute reports.
func TestPickerConfigBlockSizeAliasIgnored(t *testing.T) {
	cfg, findings := loadBoth(t, epc(`[{type: precise-prefix-cache-producer, parameters: {tokenProcessorConfig: {blockSizeTokens: 64, blockSize: 16}}},
		{type: prefix-cache-affinity-filter}, {type: token-load-scorer}]`, ""))
	require.Equal(t, 64, cfg.BlockSize)
	requireFindings(t, findings,
		want{"plugins[precise-prefix-cache-producer].parameters.tokenProcessorConfig.blockSize", llmd.NotNeeded}, crowding)

	// Equal values, or the alias alone, say nothing.
	cfg, findings = loadBoth(t, epc(`[{type: precise-prefix-cache-producer, parameters: {tokenProcessorConfig: {blockSizeTokens: 32, blockSize: 32}}},
		{type: prefix-cache-affinity-filter}, {type: token-load-scorer}]`, ""))
	require.Equal(t, 32, cfg.BlockSize)
	requireFindings(t, findings, crowding)

	// In a kvroute configuration too.
	cfg, findings, err := llmd.Load(strings.NewReader(`{"precise-prefix-cache-producer":{"tokenProcessorConfig":{"blockSizeTokens":16,"blockSize":64}}}`), llmd.Options{})
	require.NoError(t, err)
	require.Equal(t, 16, cfg.BlockSize)
	requireFindings(t, findings, want{"precise-prefix-cache-producer.tokenProcessorConfig.blockSize", llmd.NotNeeded})

	// A negative blockSizeTokens is not hidden by a positive alias.
	_, _, err = llmd.Load(strings.NewReader(`{"precise-prefix-cache-producer":{"tokenProcessorConfig":{"blockSizeTokens":-16,"blockSize":64}}}`), llmd.Options{})
	require.ErrorIs(t, err, kvroute.ErrInvalidConfig)
}

// llm-d runs the deprecated precise-prefix-cache-scorer beside a
// precise-prefix-cache-producer (the scorer defers to the producer's index):
// kvroute keeps one index, with the producer's parameters, whichever comes
// first, and reports the scorer.
func TestPickerConfigScorerBesideProducer(t *testing.T) {
	for _, plugins := range []string{
		`[{name: producer, type: precise-prefix-cache-producer, parameters: {tokenProcessorConfig: {blockSizeTokens: 64}}},
		  {name: legacy, type: precise-prefix-cache-scorer, parameters: {tokenProcessorConfig: {blockSizeTokens: 32}}},
		  {type: prefix-cache-affinity-filter}, {type: token-load-scorer}]`,
		`[{name: legacy, type: precise-prefix-cache-scorer, parameters: {tokenProcessorConfig: {blockSizeTokens: 32}}},
		  {name: producer, type: precise-prefix-cache-producer, parameters: {tokenProcessorConfig: {blockSizeTokens: 64}}},
		  {type: prefix-cache-affinity-filter}, {type: token-load-scorer}]`,
	} {
		cfg, findings := loadBoth(t, epc(plugins, ""))
		require.Equal(t, 64, cfg.BlockSize)
		// The scorer in the (default) profile weighs a prefix score kvroute
		// has not.
		requireFindings(t, findings,
			want{"plugins[legacy]", llmd.Different}, crowding,
			want{"schedulingProfiles[default].plugins[legacy]", llmd.Different})
		require.Contains(t, findings[0].Note, "configured by plugins[producer]")
	}

	// The scorer's parameters are still checked.
	_, _, err := llmd.Load(strings.NewReader(epc(`[{type: precise-prefix-cache-producer},
		{type: precise-prefix-cache-scorer, parameters: {indexerConfg: {}}}]`, "")), llmd.Options{})
	require.ErrorContains(t, err, "plugins[precise-prefix-cache-scorer].parameters.indexerConfg: unknown key")

	// Two producers, or two scorers, are still one too many.
	_, _, err = llmd.Load(strings.NewReader(epc(`[{type: precise-prefix-cache-scorer}, {name: b, type: precise-prefix-cache-scorer}]`, "")), llmd.Options{})
	require.ErrorContains(t, err, "both precise-prefix-cache-producer plugins")
}

// llm-d's affinity filter passes every endpoint at an affinityThreshold <= 0,
// negative included; kvroute's does at 0.
func TestPickerConfigNegativeAffinityThreshold(t *testing.T) {
	cfg, findings := loadBoth(t, epc(`[{type: precise-prefix-cache-producer},
		{type: prefix-cache-affinity-filter, parameters: {affinityThreshold: -1}}, {type: token-load-scorer}]`, ""))
	require.Empty(t, findings)
	require.Zero(t, *cfg.Affinity.AffinityThreshold)

	// Above 1 llm-d refuses it too.
	_, _, err := llmd.Load(strings.NewReader(`{"prefix-cache-affinity-filter":{"affinityThreshold":1.5}}`), llmd.Options{})
	require.ErrorContains(t, err, "affinityThreshold must be in [0, 1]")
}

// A token producer without vllm, modelName or udsTokenizerConfig is llm-d's
// estimate backend (its zero-configuration default): kvroute renders
// instead, and says so, as for an explicit estimate.
func TestPickerConfigTokenProducerDefaultsToEstimate(t *testing.T) {
	_, findings := loadBoth(t, epc(`[{type: token-producer}, {type: precise-prefix-cache-producer},
		{type: prefix-cache-affinity-filter}, {type: token-load-scorer}]`, ""))
	requireFindings(t, findings, want{"plugins[token-producer].parameters", llmd.Different}, crowding)
	require.Contains(t, findings[0].Note, "estimate")

	_, findings = loadBoth(t, epc(`[{type: token-producer, parameters: {estimate: {}}}, {type: precise-prefix-cache-producer},
		{type: prefix-cache-affinity-filter}, {type: token-load-scorer}]`, ""))
	requireFindings(t, findings, want{"plugins[token-producer].parameters.estimate", llmd.Different}, crowding)
}

// crowding is the finding of a prefix-cache-affinity-filter plugin: kvroute's
// filter also applies its crowding rule.
var crowding = want{"plugins[prefix-cache-affinity-filter]", llmd.Different}

// llm-d's prefix-cache-affinity-filter has no crowding rule; kvroute's
// filter, which an EndpointPickerConfig's becomes, applies its own by
// default, and says so (unless the filter is off).
func TestPickerConfigAffinityFilterCrowding(t *testing.T) {
	cfg, findings := loadBoth(t, epc(`[{type: precise-prefix-cache-producer},
		{type: prefix-cache-affinity-filter}, {type: token-load-scorer}]`, ""))
	requireFindings(t, findings, crowding)
	require.Contains(t, findings[0].Note, "affinity.crowdingRatio")
	require.Equal(t, *kvroute.DefaultConfig().Affinity.CrowdingRatio, *cfg.Affinity.CrowdingRatio)

	_, findings = loadBoth(t, epc(`[{type: precise-prefix-cache-producer},
		{type: prefix-cache-affinity-filter, parameters: {affinityThreshold: 0}}, {type: token-load-scorer}]`, ""))
	require.Empty(t, findings)
}

// llm-d's current picker subscribes to every endpoint its
// endpoint-notification-source reports and reads no podLabelSelector:
// kvroute does not narrow its subscriptions by it either, and says so.
func TestPickerConfigPodLabelSelectorNarrowsNothing(t *testing.T) {
	cfg, findings := loadBoth(t, epc(`[{type: precise-prefix-cache-producer, parameters: {kvEventsConfig: {podDiscoveryConfig: {podLabelSelector: "llm-d.ai/inference-serving=true", socketPort: 5556}}}},
		{type: prefix-cache-affinity-filter}, {type: token-load-scorer}]`, ""))
	require.Empty(t, cfg.Events.Selector)
	require.Equal(t, 5556, cfg.Events.EventsPort)
	requireFindings(t, findings,
		want{"plugins[precise-prefix-cache-producer].parameters.kvEventsConfig.podDiscoveryConfig.podLabelSelector", llmd.NotNeeded}, crowding)
}
