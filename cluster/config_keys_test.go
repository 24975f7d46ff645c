package cluster_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/cluster"
)

// A period or a queue and cap setting out of range is refused by its own
// key and value, as every other setting is: the error once named three
// periods together ("refreshPeriod, readPeriod and opTimeout must be
// positive") or none at all ("queue and cap settings must not be
// negative"), leaving the operator to find which of six keys was wrong.
func TestConfigErrorsNameTheKey(t *testing.T) {
	for _, c := range []struct{ doc, err string }{
		{`{"refreshPeriod": "-1s"}`, "refreshPeriod -1s must be positive"},
		{`{"readPeriod": "-250ms"}`, "readPeriod -250ms must be positive"},
		{`{"opTimeout": "-1ns"}`, "opTimeout -1ns must be positive"},
		{`{"decisionQueue": -1}`, "decisionQueue -1 is negative"},
		{`{"deltaQueue": -2}`, "deltaQueue -2 is negative"},
		{`{"maxPendingDeltaBytes": -3}`, "maxPendingDeltaBytes -3 is negative"},
		{`{"maxKeysPerDecision": -4}`, "maxKeysPerDecision -4 is negative"},
		{`{"maxPeers": -5}`, "maxPeers -5 is negative"},
		{`{"maxEndpoints": -6}`, "maxEndpoints -6 is negative"},
		// Past ten years the sums of the periods (StalenessBound, 2 ×
		// lease) would come near overflowing time.Duration: over about 146
		// years 2 × refreshPeriod wrapped negative and passed the lease
		// check.
		{`{"refreshPeriod": "1500000h", "lease": "1500000h"}`, "lease 1500000h0m0s is over 87600h0m0s"},
		{`{"refreshPeriod": "1500000h"}`, "refreshPeriod 1500000h0m0s is over 87600h0m0s"},
		{`{"lease": "87601h"}`, "lease 87601h0m0s is over 87600h0m0s"},
		{`{"readPeriod": "2000000h"}`, "readPeriod 2000000h0m0s is over 87600h0m0s"},
		{`{"opTimeout": "100000h"}`, "opTimeout 100000h0m0s is over 87600h0m0s"},
		{`{"publishInterval": "100000h"}`, "publishInterval 100000h0m0s is over 87600h0m0s"},
		{`{"lease": "3000000h"}`, `lease: duration "3000000h" is out of range`},
	} {
		_, err := cluster.LoadConfig(strings.NewReader(c.doc))
		require.ErrorIs(t, err, cluster.ErrInvalidConfig, c.doc)
		require.ErrorContains(t, err, c.err, c.doc)
	}
	_, err := cluster.LoadConfig(strings.NewReader(`{"lease": "87600h", "refreshPeriod": "43800h", "readPeriod": "87600h", "opTimeout": "87600h", "publishInterval": "87600h"}`))
	require.NoError(t, err, "ten years")
}
