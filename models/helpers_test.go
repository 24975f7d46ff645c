package models

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/telemetry"
)

func setWith(reg prometheus.Registerer) telemetry.Set { return telemetry.Set{Registerer: reg} }

// mustVec returns the rewrite counter registered on reg (registering an
// identical one returns the existing collector).
func mustVec(t *testing.T, reg prometheus.Registerer) *prometheus.CounterVec {
	t.Helper()
	m, err := newRewriteMetrics(reg)
	require.NoError(t, err)
	return m.rewrites
}
