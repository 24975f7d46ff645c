package admission

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/recent"
)

// FromHeader reads the Inference Extension's headers and llm-d's names for
// them (each only when the Inference Extension's is absent), the queue
// timeout as a deadline from now, and refuses a malformed timeout.
func TestFromHeaderReadsBothProjectsHeaders(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct {
		name          string
		h             map[string]string
		obj, fairness string
	}{
		{"gateway's", map[string]string{HeaderObjective: "premium", HeaderFairnessID: "tenant-a"}, "premium", "tenant-a"},
		{"llm-d's", map[string]string{"x-llm-d-inference-objective": "batch", "x-llm-d-inference-fairness-id": "tenant-b"}, "batch", "tenant-b"},
		{"both: the gateway's wins", map[string]string{HeaderObjective: "premium", HeaderObjectiveLLMD: "batch",
			HeaderFairnessID: "tenant-a", HeaderFairnessIDLLMD: "tenant-b"}, "premium", "tenant-a"},
		{"none", nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.h {
				h.Set(k, v)
			}
			ctx, err := FromHeader(context.Background(), h, now)
			require.NoError(t, err)
			require.Equal(t, tc.obj, objectiveOf(ctx))
			require.Equal(t, tc.fairness, fairnessOf(ctx))
			require.NotNil(t, recordOf(ctx), "the request's admission record")
			_, ok := deadlineOf(ctx)
			require.False(t, ok)
		})
	}
	h := http.Header{}
	h.Set(HeaderQueueTimeout, "2s")
	ctx, err := FromHeader(context.Background(), h, now)
	require.NoError(t, err)
	d, ok := deadlineOf(ctx)
	require.True(t, ok)
	require.Equal(t, now.Add(2*time.Second), d)
	for _, bad := range []string{"2", "-1s", "0s", "2h"} {
		h.Set(HeaderQueueTimeout, bad)
		_, err := FromHeader(context.Background(), h, now)
		require.Error(t, err, bad)
	}
}

// RetryAfterValue is the hint in whole seconds, rounded up and at least 1;
// a hint within a second of the largest Duration saturates instead of
// wrapping to a negative count (which would read as 1).
func TestRetryAfterValueRoundsUpAndSaturates(t *testing.T) {
	const longest = time.Duration(1<<63 - 1)
	for hint, want := range map[time.Duration]string{
		-time.Second: "1", 0: "1", time.Nanosecond: "1", time.Second: "1", time.Second + 1: "2",
		3 * time.Second: "3", longest: "9223372037", longest - time.Second + 2: "9223372036",
		longest - longest%time.Second: "9223372036",
	} {
		require.Equal(t, want, RetryAfterValue(hint), "hint %v", hint)
	}
}

// The error for a malformed queue timeout quotes the client's value cut to
// recent.MaxText bytes, so that a huge header does not make a huge error.
func TestFromHeaderCutsAHugeMalformedTimeoutInItsError(t *testing.T) {
	h := http.Header{}
	h.Set(HeaderQueueTimeout, strings.Repeat("9", 1<<20))
	_, err := FromHeader(context.Background(), h, time.Unix(1_700_000_000, 0))
	require.Error(t, err)
	require.Less(t, len(err.Error()), 2*recent.MaxText)
	require.Contains(t, err.Error(), strings.Repeat("9", recent.MaxText)+`"...`)
}

// A fairness ID names its flow by its first 256 bytes: longer IDs are cut,
// so two that share them are one flow, and shorter ones stay apart.
func TestFairnessIDsAreCutTo256Bytes(t *testing.T) {
	long := strings.Repeat("t", maxNameLen)
	flow := func(id string) string {
		h := http.Header{}
		h.Set(HeaderFairnessID, id)
		ctx, err := FromHeader(context.Background(), h, time.Unix(1_700_000_000, 0))
		require.NoError(t, err)
		return fairnessOf(ctx)
	}
	require.Equal(t, long, flow(long+"-a"))
	require.Equal(t, flow(long+"-a"), flow(long+"-b"))
	require.NotEqual(t, flow(long[1:]+"a"), flow(long[1:]+"b"))
}
