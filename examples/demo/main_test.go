package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseFlags(t *testing.T) {
	o, err := parseFlags(nil, io.Discard)
	require.NoError(t, err)
	require.False(t, o.Fast)
	require.Equal(t, 2, o.Engines)
	require.Zero(t, o.Interval, "the scenario's default (3 s) applies")
	require.Nil(t, o.Logger)

	o, err = parseFlags([]string{"--fast", "--interval", "250ms", "--engines", "3", "--load-requests", "10",
		"--engine-blocks", "256", "--load-groups", "4", "--hold", "--verbose"}, io.Discard)
	require.NoError(t, err)
	require.True(t, o.Fast)
	require.True(t, o.Hold)
	require.Equal(t, 250*time.Millisecond, o.Interval)
	require.Equal(t, 3, o.Engines)
	require.Equal(t, 10, o.LoadRequests)
	require.Equal(t, 256, o.EngineBlocks)
	require.Equal(t, 4, o.LoadGroups)
	require.NotNil(t, o.Logger)

	for _, bad := range [][]string{{"--engines", "0"}, {"--interval", "-1s"}, {"--load-requests", "-1"}, {"extra"}, {"--nope"}} {
		_, err := parseFlags(bad, io.Discard)
		require.Error(t, err, bad)
	}
	_, err = parseFlags([]string{"--help"}, io.Discard)
	require.ErrorIs(t, err, flag.ErrHelp)
}

// TestParseFlagsRefusesFlagsTheModeIgnores: --pd runs four engines of its
// own and neither a burst nor the comparison, --replicas 2 runs its own
// burst and no comparison; a flag of those they would not read is refused
// by name rather than accepted and ignored.
func TestParseFlagsRefusesFlagsTheModeIgnores(t *testing.T) {
	for _, args := range [][]string{
		{"--pd", "--engines", "8"}, {"--pd", "--interval", "1s"}, {"--pd", "--load-requests", "10"}, {"--pd", "--load-groups", "3"},
		{"--replicas", "2", "--interval", "1s"}, {"--replicas", "2", "--load-requests", "10"}, {"--replicas", "2", "--load-groups", "3"},
	} {
		_, err := parseFlags(args, io.Discard)
		require.ErrorContains(t, err, args[len(args)-2], args)
	}
	for _, args := range [][]string{{"--pd", "--fast", "--engine-blocks", "2048", "--verbose"}, {"--replicas", "2", "--engines", "3", "--fast"}} {
		_, err := parseFlags(args, io.Discard)
		require.NoError(t, err, args)
	}
}

func TestRunReportsBadOptions(t *testing.T) {
	err := run(context.Background(), []string{"--engine-blocks", "2"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "cannot hold")
}

// The README, the command's doc and its --help describe the demo that runs:
// as many steps as e2e.Run has numbered sections, and one running time.
func TestDocsAgreeWithTheDemo(t *testing.T) {
	run, err := os.ReadFile("../../e2e/run.go")
	require.NoError(t, err)
	steps := len(regexp.MustCompile(`section\(w, (?:fmt\.Sprintf\()?"\d\. `).FindAll(run, -1))
	require.Equal(t, 6, steps, "e2e.Run's numbered steps")
	word := map[int]string{3: "three", 4: "four", 5: "five", 6: "six"}[steps]

	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, demo, _ := strings.Cut(string(readme), "### The one-command demo")
	demo, _, _ = strings.Cut(demo, "\n### ")
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	for name, text := range map[string]string{"README": demo, "doc.go": string(doc)} {
		require.Contains(t, text, word+" steps", name)
		for _, w := range []string{"three", "four", "five", "six"} {
			if w != word {
				require.NotContains(t, text, w+" steps", name)
			}
		}
	}
	for i := 1; i <= steps; i++ {
		require.Contains(t, demo, fmt.Sprintf("\n%d. **", i), "the README lists step %d", i)
	}
	require.NotContains(t, demo, fmt.Sprintf("\n%d. **", steps+1))

	const duration = "about 80 s"
	require.Contains(t, demo, duration)
	require.Contains(t, string(doc), strings.TrimPrefix(duration, "about "))
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	require.Contains(t, string(src), strings.TrimPrefix(duration, "about "), "--fast's help names the full run's time")
	for _, stale := range []string{"two minutes", "70 s"} {
		require.NotContains(t, demo, stale)
		require.NotContains(t, string(doc), stale)
		require.NotContains(t, string(src), stale)
	}
}

// Every flag the demo defines has a row in its command doc's flag list and
// is named in the README's demo section, so that neither lists fewer flags
// than --help.
func TestDocsNameEveryFlag(t *testing.T) {
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	defs := regexp.MustCompile(`fs\.\w+Var\(&[^,]+, "([a-z-]+)"`).FindAllSubmatch(src, -1)
	require.NotEmpty(t, defs)
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, demo, _ := strings.Cut(string(readme), "### The one-command demo")
	demo, _, _ = strings.Cut(demo, "\n### ")
	for _, d := range defs {
		flag := "--" + string(d[1])
		require.True(t, strings.Contains(string(doc), "//\t"+flag+" "), "doc.go's flag list has no row for %s", flag)
		require.True(t, strings.Contains(demo, flag), "the README's demo section does not name %s", flag)
	}
}
