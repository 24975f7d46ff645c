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
		SkipInvalidBlockSize: "invalid_block_size", SkipInvalidTokens: "invalid_tokens",
		SkipNoBlocks: "no_blocks", SkipUnknownGroup: "unknown_group", SkipLoRAUnnamed: "lora_unnamed",
		SkipIndexRejected: "index_rejected",
		DropDecodeError:   "decode_error", DropQueueFull: "queue_full", DropStaleSeq: "stale_seq",
		DropUnknownEvent: "unknown_event", DropHoldFull: "hold_full", DropUnknownEndpoint: "unknown_endpoint",
		DropNotSelected: "not_selected", DropAlreadyApplied: "already_applied", DropModelPending: "model_pending",
		DropModelMismatch:               "model_mismatch",
		DropMalformed:                   "malformed",
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
