package approx

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A capacity out of range is refused by its one key and value: the error
// once named gpuBlocks, cpuBlocks and blockSize together and showed the
// capacity by its Go field names ({GPUBlocks:-1 CPUBlocks:0 BlockSize:16}),
// which no configuration file spells.
func TestCapacityErrorsNameTheKey(t *testing.T) {
	for _, c := range []struct{ doc, err string }{
		{`{"capacity":{"gpuBlocks":-1}}`, "approx: capacity: gpuBlocks must be >= 0, got -1"},
		{`{"capacity":{"gpuBlocks":8,"cpuBlocks":-2}}`, "approx: capacity: cpuBlocks must be >= 0, got -2"},
		{`{"capacity":{"gpuBlocks":8,"blockSize":-16}}`, "approx: capacity: blockSize must be >= 0, got -16"},
		{`{"capacity":{"gpuBlocks":2147483649}}`, "approx: capacity: gpuBlocks must be at most 2147483648, got 2147483649"},
		{`{"endpoints":{"a":{"gpuBlocks":8,"cpuBlocks":2147483649}}}`, "approx: endpoints[a]: cpuBlocks must be at most 2147483648, got 2147483649"},
		{`{"endpoints":{"a":{"gpuBlocks":8,"blockSize":1048577}}}`, "approx: endpoints[a]: blockSize must be at most 1048576, got 1048577"},
	} {
		_, err := LoadConfig(strings.NewReader(c.doc))
		require.ErrorContains(t, err, c.err, c.doc)
		require.NotContains(t, err.Error(), "GPUBlocks", c.doc)
	}
}
