package models

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// ParseList keeps a label's model names in order, trimmed, without empty,
// invalid or repeated ones, and at most max of them.
func TestParseList(t *testing.T) {
	require.Equal(t, []string{"llama", "qwen 2", "mistral"}, ParseList(" llama, qwen 2 ,,llama,mistral ", 0))
	require.Equal(t, []string{"a", "b"}, ParseList("a,b,c", 2))
	require.Equal(t, []string{"a", "c"}, ParseList("a,\x01b,c", 0), "a control character leaves the name out")
	require.Nil(t, ParseList(" , ,", 0))
	long := strings.Repeat("m", MaxNameBytes+1)
	require.Equal(t, []string{"ok"}, ParseList(long+",ok", 0))
	var many []string
	for i := range DefaultMaxModels + 5 {
		many = append(many, strings.Repeat("x", i+1))
	}
	require.Len(t, ParseList(strings.Join(many, ","), 0), DefaultMaxModels)
}

// FuzzParseList: whatever a label or annotation holds, ParseList returns at
// most max names, each valid, trimmed and distinct, each one of the
// input's comma-separated parts (seed corpus in testdata/fuzz).
func FuzzParseList(f *testing.F) {
	for _, s := range []string{"", "llama", "a,b,c", " a , a ,b", ",,,", "a,\x00,b", "é,\xff,\x7f", strings.Repeat("m,", 40)} {
		f.Add(s, 0)
		f.Add(s, 2)
	}
	f.Fuzz(func(t *testing.T, v string, max int) {
		got := ParseList(v, max)
		limit := max
		if limit <= 0 {
			limit = DefaultMaxModels
		}
		require.LessOrEqual(t, len(got), limit)
		parts := strings.Split(v, ",")
		for i, m := range got {
			require.NoError(t, checkName(m))
			require.Equal(t, strings.TrimSpace(m), m)
			require.False(t, slices.Contains(got[:i], m), "%q repeated", m)
			require.True(t, slices.ContainsFunc(parts, func(p string) bool { return strings.TrimSpace(p) == m }))
		}
	})
}
