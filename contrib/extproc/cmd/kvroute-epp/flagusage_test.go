package main

import (
	"bytes"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The flag package ends a flag's help with "(default X)" itself whenever
// its default is not the zero value: a help text that states the default
// too says it twice, and can say it differently (--pool-namespace's
// resolved "default" beside the rule that chose it).
func TestFlagHelpStatesEachDefaultOnce(t *testing.T) {
	var f flags
	fs := newFlagSet(&f, io.Discard)
	var out bytes.Buffer
	fs.SetOutput(&out)
	fs.PrintDefaults()
	entries := regexp.MustCompile(`(?m)^  -`).Split(out.String(), -1)
	require.Greater(t, len(entries), 50, "every flag's help")
	for _, e := range entries {
		require.LessOrEqual(t, strings.Count(e, "(default"), 1, "-%s", e)
	}
	for _, name := range []string{"health-checking", "tracing", "pool-namespace"} {
		require.NotContains(t, fs.Lookup(name).Usage, "default true")
		require.NotContains(t, fs.Lookup(name).Usage, "(default")
	}
}
