package kvroute

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDecisionAtEnd: the function AtEnd registers runs once, at the first
// Done (not at FirstChunk, not again at a second Done or at Release), at
// Release without a Done, and at once on a Decision already ended; nil
// Decisions and nil functions are ignored.
func TestDecisionAtEnd(t *testing.T) {
	r, eps, p := stairRouter(t, 4, 256)
	var n atomic.Int32
	count := func() { n.Add(1) }

	d := pick(t, r, p, eps)
	d.AtEnd(count)
	d.FirstChunk()
	require.Zero(t, n.Load())
	d.Done(DoneInfo{})
	require.Equal(t, int32(1), n.Load())
	d.Done(DoneInfo{})
	d.Release()
	require.Equal(t, int32(1), n.Load())

	d = pick(t, r, p, eps)
	d.AtEnd(count)
	d.Release()
	require.Equal(t, int32(2), n.Load(), "Release without Done ends the request")

	d = pick(t, r, p, eps)
	d.Done(DoneInfo{})
	d.AtEnd(count)
	require.Equal(t, int32(3), n.Load(), "already ended: runs at once")
	d.AtEnd(nil)
	(*Decision)(nil).AtEnd(count)
	require.Equal(t, int32(3), n.Load())
}

// TestDecisionAtEndRace sets the function while another goroutine ends the
// request: it runs exactly once either way.
func TestDecisionAtEndRace(t *testing.T) {
	r, eps, p := stairRouter(t, 4, 256)
	for range 200 {
		var n atomic.Int32
		d := pick(t, r, p, eps)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); d.Done(DoneInfo{}) }()
		go func() { defer wg.Done(); d.AtEnd(func() { n.Add(1) }) }()
		wg.Wait()
		require.Equal(t, int32(1), n.Load())
	}
}
