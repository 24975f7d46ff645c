package models

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// ParseList keeps a label's model names in order, trimmed, without empty,
// invalid or repeated ones, and at most max of them; it counts the names
// it leaves out, repeats among them (as the poller counts an answer's), and
// not the blanks between commas, which are no names.
func TestParseList(t *testing.T) {
	check := func(v string, max int, want []string, dropped int, msg ...any) {
		t.Helper()
		got, n := ParseList(v, max)
		require.Equal(t, want, got, msg...)
		require.Equal(t, dropped, n, msg...)
	}
	check(" llama, qwen 2 ,,llama,mistral ", 0, []string{"llama", "qwen 2", "mistral"}, 1, "a repeat is a drop, a blank none")
	check("a, a ,a", 0, []string{"a"}, 2, "each repeat")
	check("a,b,c", 2, []string{"a", "b"}, 1)
	check("a,\x01b,c", 0, []string{"a", "c"}, 1, "a control character leaves the name out")
	check(" , ,", 0, nil, 0)
	check(strings.Repeat("m", MaxNameBytes+1)+",ok", 0, []string{"ok"}, 1)
	var many []string
	for i := range DefaultMaxModels + 5 {
		many = append(many, strings.Repeat("x", i+1))
	}
	got, n := ParseList(strings.Join(many, ","), 0)
	require.Len(t, got, DefaultMaxModels)
	require.Equal(t, 5, n)
}

// FuzzParseList: whatever a label or annotation holds, ParseList returns at
// most max names and counts no part twice, each valid, trimmed and distinct, each one of the
// input's comma-separated parts (seed corpus in testdata/fuzz).
func FuzzParseList(f *testing.F) {
	for _, s := range []string{"", "llama", "a,b,c", " a , a ,b", ",,,", "a,\x00,b", "é,\xff,\x7f", strings.Repeat("m,", 40)} {
		f.Add(s, 0)
		f.Add(s, 2)
	}
	f.Fuzz(func(t *testing.T, v string, max int) {
		got, dropped := ParseList(v, max)
		limit := max
		if limit <= 0 {
			limit = DefaultMaxModels
		}
		require.LessOrEqual(t, len(got), limit)
		require.GreaterOrEqual(t, dropped, 0)
		require.LessOrEqual(t, len(got)+dropped, len(strings.Split(v, ",")), "each part kept, dropped or neither")
		parts := strings.Split(v, ",")
		for i, m := range got {
			require.NoError(t, checkName(m))
			require.Equal(t, strings.TrimSpace(m), m)
			require.False(t, slices.Contains(got[:i], m), "%q repeated", m)
			require.True(t, slices.ContainsFunc(parts, func(p string) bool { return strings.TrimSpace(p) == m }))
		}
	})
}
