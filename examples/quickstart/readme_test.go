package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The README's Go block is this package's main.go, character for character,
// so the quickstart a reader copies is the one that is built and run by
// TestQuickstartRoutesALongPromptToTheWarmEngine.
func TestREADMEShowsTheQuickstart(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	const marker = "<!-- quickstart: examples/quickstart/main.go"
	doc := string(readme)
	i := strings.Index(doc, marker)
	require.GreaterOrEqual(t, i, 0, "the README marks its quickstart block")
	rest := doc[i:]
	start := strings.Index(rest, "```go\n")
	require.GreaterOrEqual(t, start, 0)
	block := rest[start+len("```go\n"):]
	end := strings.Index(block, "\n```")
	require.GreaterOrEqual(t, end, 0)
	require.Equal(t, string(src), block[:end+1], "README.md's quickstart block differs from examples/quickstart/main.go")
}
