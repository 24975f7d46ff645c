package kvevents

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvindex"
)

// The reason label values are an interface (dashboards and alerts in deploy/
// and the README's metrics table match them): typing them must not have
// changed a single string.
func TestReasonLabelValuesUnchanged(t *testing.T) {
	for r, want := range map[Reason]string{
		skipInvalidBlockSize: "invalid_block_size", skipInvalidTokens: "invalid_tokens",
		skipNoBlocks: "no_blocks", skipUnknownGroup: "unknown_group", skipLoRAUnnamed: "lora_unnamed",
		skipIndexRejected: "index_rejected",
		dropDecodeError:   "decode_error", dropQueueFull: "queue_full", dropStaleSeq: "stale_seq",
		dropUnknownEvent: "unknown_event", dropHoldFull: "hold_full", dropUnknownEndpoint: "unknown_endpoint",
		dropNotSelected: "not_selected", dropAlreadyApplied: "already_applied",
		dropModelMismatch:               "model_mismatch",
		dropSuperseded:                  "superseded",
		dropMalformed:                   "malformed",
		kvindex.ReasonParentMissing:     "parent_missing",
		kvindex.ReasonNonPrefixKind:     "non_prefix_kind",
		kvindex.ReasonNonDense:          "non_dense",
		kvindex.ReasonBlockSizeMismatch: "block_size_mismatch",
		kvindex.ReasonUnknownHash:       "unknown_hash",
		kvindex.ReasonTooManyEndpoints:  "too_many_endpoints",
	} {
		require.Equal(t, want, string(r))
	}
}
