package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTimeQueueOrder: values come back earliest first and, at equal times,
// in push order; popDue hands back only what is due.
func TestTimeQueueOrder(t *testing.T) {
	t0 := time.Unix(0, 0)
	var q timeQueue[string]
	_, ok := q.next()
	require.False(t, ok)
	q.push(t0.Add(2*time.Second), "c1")
	q.push(t0.Add(time.Second), "b1")
	q.push(t0.Add(2*time.Second), "c2")
	q.push(t0, "a")
	q.push(t0.Add(time.Second), "b2")
	q.push(t0.Add(2*time.Second), "c3")

	at, ok := q.next()
	require.True(t, ok)
	require.Equal(t, t0, at)

	var got []string
	for v, ok := q.popDue(t0.Add(time.Second)); ok; v, ok = q.popDue(t0.Add(time.Second)) {
		got = append(got, v)
	}
	require.Equal(t, []string{"a", "b1", "b2"}, got)
	require.Equal(t, 3, q.Len())

	q.push(t0.Add(2*time.Second), "c4")
	got = got[:0]
	for q.Len() > 0 {
		at, v := q.pop()
		require.Equal(t, t0.Add(2*time.Second), at)
		got = append(got, v)
	}
	require.Equal(t, []string{"c1", "c2", "c3", "c4"}, got)
}
