package recent

import (
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestRingListsNewestFirst(t *testing.T) {
	var r Ring[string]
	require.Empty(t, r.List())
	r.Add("a")
	r.Add("b")
	require.Equal(t, []string{"b", "a"}, r.List())
	for i := range Size {
		r.Add(string(rune('c' + i)))
	}
	l := r.List()
	require.Len(t, l, Size)
	require.Equal(t, string(rune('c'+Size-1)), l[0])
	require.Equal(t, "c", l[Size-1], "the two oldest are forgotten")
	require.Equal(t, Size+2, r.Added(), "the count goes on past the ring's size")
}

func TestRingConcurrentUse(t *testing.T) {
	var r Ring[int]
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 100 {
				r.Add(g*100 + i)
				_ = r.List()
			}
		})
	}
	wg.Wait()
	require.Len(t, r.List(), Size)
	require.Equal(t, 400, r.Added())
}

func TestClip(t *testing.T) {
	s, cut := Clip("short")
	require.Equal(t, "short", s)
	require.False(t, cut)
	s, cut = Clip(strings.Repeat("r", MaxText))
	require.Len(t, s, MaxText)
	require.False(t, cut)
	long := "a" + strings.Repeat("é", 4<<10) // 2-byte runes from an odd offset
	s, cut = Clip(long)
	require.True(t, cut)
	require.True(t, utf8.ValidString(s))
	require.True(t, strings.HasPrefix(long, s))
	require.Len(t, s, MaxText-1, "cut before the rune the bound splits")
}
