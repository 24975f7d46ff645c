package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A short run writes its table with one row per scenario and load (the
// figures themselves are not asserted: they depend on the machine). The
// engines, the router and the requests leave no goroutine behind.
func TestRenderloadWritesItsTable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts simulated engines and sends requests for a few seconds")
	}
	defer leakcheck.Check(t)()
	dir := t.TempDir()
	var out strings.Builder
	require.NoError(t, run([]string{"-duration", "300ms", "-loads", "0.5", "-words", "64", "-render-time", "20ms", "-out", dir}, &out))
	b, err := os.ReadFile(filepath.Join(dir, "renderload.md"))
	require.NoError(t, err)
	require.Equal(t, out.String(), string(b))
	for _, sc := range scenarios {
		require.Contains(t, string(b), "| "+sc.name+" | 0.5× |")
	}
	require.ErrorContains(t, run([]string{"-renderers", "1"}, &out), "-renderers >= 2")
	require.ErrorContains(t, run([]string{"-loads", "x"}, &out), "-loads")
}
