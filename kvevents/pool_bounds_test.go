package kvevents

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvindex"
)

// The sizes NewPool allocates by, or multiplies, are bounded where the
// configuration is read: a queueSize meant as bytes allocated every
// worker's queue up front (72 bytes a message, gigabytes), and a far larger
// one made NewPool panic instead of returning an error.
func TestPoolConfigBoundsSizes(t *testing.T) {
	for _, c := range []struct {
		doc, err string
	}{
		{`{"queueSize": 1048576}`, ""}, // × the default 4 workers: the bound
		{`{"concurrency": 1024, "queueSize": 4096}`, ""},
		{`{"concurrency": 1, "queueSize": 4194304}`, ""},
		{`{"bindMaxStreams": 1048576}`, ""},
		{`{"queueSize": 1048577}`, "queueSize 1048577 × concurrency 4 must be at most 4194304"},
		{`{"queueSize": 100000000}`, "queueSize 100000000 × concurrency 4"},
		{`{"queueSize": 9223372036854775807}`, "queueSize 9223372036854775807 × concurrency 4"},
		{`{"concurrency": 1024}`, "queueSize 16384 × concurrency 1024"}, // the default queue, times 1024
		{`{"concurrency": 1025, "queueSize": 1}`, "concurrency 1025 must be at most 1024"},
		{`{"concurrency": 9223372036854775807}`, "concurrency 9223372036854775807 must be at most 1024"},
		{`{"bindMaxStreams": 1048577}`, "bindMaxStreams 1048577 must be at most 1048576"},
		{`{"bindMaxStreams": 4611686018427387904}`, "bindMaxStreams 4611686018427387904"},
	} {
		_, err := LoadPoolConfig(strings.NewReader(c.doc))
		if c.err == "" {
			require.NoError(t, err, c.doc)
			continue
		}
		require.ErrorContains(t, err, c.err, c.doc)
	}

	ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	defer ix.Close()
	_, err = NewPool(PoolConfig{QueueSize: 1 << 45}, ix, Options{})
	require.ErrorContains(t, err, "queueSize 35184372088832", "NewPool refuses what it cannot allocate, instead of panicking")
}
