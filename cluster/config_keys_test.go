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
	} {
		_, err := cluster.LoadConfig(strings.NewReader(c.doc))
		require.ErrorIs(t, err, cluster.ErrInvalidConfig, c.doc)
		require.ErrorContains(t, err, c.err, c.doc)
	}
}
