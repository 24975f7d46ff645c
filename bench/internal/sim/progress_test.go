package sim

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A sweep under WithProgress says how many runs it has and, at the end,
// that all are done; without it, it prints nothing.
func TestSweepReportsProgress(t *testing.T) {
	cfg := DefaultConfig(SharedPrefix, 0.5)
	cfg.Workload.Requests, cfg.Fleet.Engines = 40, 2
	var out bytes.Buffer
	_, err := Sweep(WithProgress(context.Background(), &out, "sweep"), cfg, []Workload{cfg.Workload}, []float64{0.5},
		[]Policy{KVRoute, RoundRobin}, 2)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Equal(t, "sweep: 3 runs ...", lines[0], "two policies and the one-engine reference")
	require.True(t, strings.HasPrefix(lines[len(lines)-1], "sweep: 3/3 runs done (last: "), lines[len(lines)-1])
}
