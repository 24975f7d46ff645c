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
		want{"plugins[precise-prefix-cache-producer].parameters.tokenProcessorConfig.blockSize", llmd.NotNeeded})

	// Equal values, or the alias alone, say nothing.
	cfg, findings = loadBoth(t, epc(`[{type: precise-prefix-cache-producer, parameters: {tokenProcessorConfig: {blockSizeTokens: 32, blockSize: 32}}},
		{type: prefix-cache-affinity-filter}, {type: token-load-scorer}]`, ""))
	require.Equal(t, 32, cfg.BlockSize)
	require.Empty(t, findings)

	// In a kvroute configuration too.
	cfg, findings, err := llmd.Load(strings.NewReader(`{"precise-prefix-cache-producer":{"tokenProcessorConfig":{"blockSizeTokens":16,"blockSize":64}}}`), llmd.Options{})
	require.NoError(t, err)
	require.Equal(t, 16, cfg.BlockSize)
	requireFindings(t, findings, want{"precise-prefix-cache-producer.tokenProcessorConfig.blockSize", llmd.NotNeeded})

	// A negative blockSizeTokens is not hidden by a positive alias.
	_, _, err = llmd.Load(strings.NewReader(`{"precise-prefix-cache-producer":{"tokenProcessorConfig":{"blockSizeTokens":-16,"blockSize":64}}}`), llmd.Options{})
	require.ErrorIs(t, err, kvroute.ErrInvalidConfig)
}
