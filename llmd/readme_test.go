package llmd_test

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/llmd"
)

// readmeGuideFindings matches the README's count of the findings the
// current guide's EndpointPickerConfig translates with.
var readmeGuideFindings = regexp.MustCompile(`the current guide translates with\s+(\w+) findings, all "not needed" or "differently"`)

// The README's count of the current guide's findings, and their kinds, are
// what llmd.Load reports for the guide's values (the findings
// TestGuidePrecisePrefixCacheRouting pins one by one).
func TestREADMECountsTheGuidesFindings(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	m := readmeGuideFindings.FindSubmatch(readme)
	require.NotNil(t, m, "the README counts the current guide's findings")
	counts := []string{"no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"}
	n := slices.Index(counts, string(m[1]))
	require.GreaterOrEqual(t, n, 0, "the README's count %q", m[1])

	_, findings := loadBoth(t, guideValues(t, "testdata/guide/precise-prefix-cache-routing.values.yaml"))
	require.Len(t, findings, n, "README.md: the current guide translates with %s findings", m[1])
	for _, f := range findings {
		require.Contains(t, []llmd.Kind{llmd.NotNeeded, llmd.Different}, f.Kind, f.Path)
	}
}
