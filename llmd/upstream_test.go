package llmd_test

import (
	"testing"

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
