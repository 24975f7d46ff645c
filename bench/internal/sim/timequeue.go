package sim

import (
	"container/heap"
	"time"
)

// timeQueue holds values due at virtual times and hands them back earliest
// first; values due at the same time come back in the order they were
// pushed (each push takes the next sequence number, the tie-break). The
// order is a total one, so a run's event order, and with it every report,
// does not depend on the heap's layout. The zero value is an empty queue.
//
// The simulation's arrivals, KV-event deliveries, session turns, leader
// callbacks and published shared-state messages each wait in one.
type timeQueue[T any] struct {
	items timeItems[T]
	seq   uint64
}

// timeItem is one queued value and its (at, seq) key.
type timeItem[T any] struct {
	at  time.Time
	seq uint64
	v   T
}

// Len is the number of values queued.
func (q *timeQueue[T]) Len() int { return len(q.items) }

// push queues v, due at at.
func (q *timeQueue[T]) push(at time.Time, v T) {
	q.seq++
	heap.Push(&q.items, timeItem[T]{at: at, seq: q.seq, v: v})
}

// next is the time of the earliest value; false when the queue is empty.
func (q *timeQueue[T]) next() (time.Time, bool) {
	if len(q.items) == 0 {
		return time.Time{}, false
	}
	return q.items[0].at, true
}

// pop removes and returns the earliest value and its time; the queue must
// not be empty.
func (q *timeQueue[T]) pop() (time.Time, T) {
	it := heap.Pop(&q.items).(timeItem[T])
	return it.at, it.v
}

// popDue removes and returns the earliest value if it is due at or before
// now; false otherwise.
func (q *timeQueue[T]) popDue(now time.Time) (T, bool) {
	if len(q.items) == 0 || q.items[0].at.After(now) {
		var zero T
		return zero, false
	}
	_, v := q.pop()
	return v, true
}

// timeItems is the heap under a timeQueue, ordered by time, then seq.
type timeItems[T any] []timeItem[T]

func (h timeItems[T]) Len() int { return len(h) }
func (h timeItems[T]) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h timeItems[T]) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timeItems[T]) Push(x any)   { *h = append(*h, x.(timeItem[T])) }
func (h *timeItems[T]) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = timeItem[T]{} // drop the reference for the collector
	*h = old[:len(old)-1]
	return it
}
