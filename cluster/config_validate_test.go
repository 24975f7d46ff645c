package cluster

import (
	"crypto/rand"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// countDraws makes randRead count its calls for the rest of the test.
func countDraws(t *testing.T) *int {
	t.Helper()
	n := new(int)
	t.Cleanup(func() { randRead = rand.Read })
	randRead = func(b []byte) (int, error) {
		*n++
		return rand.Read(b)
	}
	return n
}

// TestValidateDrawsNoReplicaID: validating a configuration (Validate, or
// LoadConfig, which validates what it decodes) reads each zero setting as
// its default but draws no replica ID, so validating has no effect; only
// WithDefaults draws one, once per call, as before.
func TestValidateDrawsNoReplicaID(t *testing.T) {
	draws := countDraws(t)
	c := Config{Addrs: []string{"10.0.0.1:6379"}}
	require.NoError(t, c.Validate())
	require.NoError(t, c.Validate())
	loaded, err := LoadConfig(strings.NewReader(`{"addrs": ["10.0.0.1:6379"], "lease": "6s"}`))
	require.NoError(t, err)
	require.Empty(t, loaded.ReplicaID, "LoadConfig leaves the ID to New")
	require.Zero(t, *draws, "validation drew a replica ID")

	d := c.WithDefaults()
	require.Equal(t, 1, *draws)
	require.Regexp(t, regexp.MustCompile(`^[A-Za-z0-9_.:-]+-[0-9a-f]{12}$`), d.ReplicaID)
	require.NoError(t, d.Validate())
	require.NotEqual(t, d.ReplicaID, c.WithDefaults().ReplicaID, "each WithDefaults draws its own")
	require.Equal(t, 2, *draws)
	require.Equal(t, "router-0", Config{ReplicaID: "router-0"}.WithDefaults().ReplicaID)
	require.Equal(t, 2, *draws, "a given ID is kept")

	// Zero settings are read as their defaults; a wrong one is still refused.
	require.NoError(t, Config{}.Validate())
	require.ErrorIs(t, Config{RefreshPeriod: -1}.Validate(), ErrInvalidConfig)
	require.ErrorIs(t, Config{Lease: DefaultRefreshPeriod}.Validate(), ErrInvalidConfig, "a lease shorter than two refreshes")
	require.ErrorIs(t, Config{ReplicaID: "a b"}.Validate(), ErrInvalidConfig)
	require.Zero(t, *draws-2)
}
