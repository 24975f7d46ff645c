package replay

import (
	"sort"
	"sync"
)

// DefaultBufferSize is vLLM's default replay buffer: the last 10,000 batches.
const DefaultBufferSize = 10_000

// Entry is one buffered batch.
type Entry struct {
	Seq     uint64
	Topic   []byte
	Payload []byte
}

// Buffer is a ring of the last N published batches, in sequence order, for a
// Server to replay. It is safe for concurrent use. It keeps the slices it is
// given: callers must not modify them afterwards.
type Buffer struct {
	mu   sync.Mutex
	ents []Entry // ring storage, len == capacity
	head int     // index of the oldest entry
	n    int     // entries held
}

// NewBuffer returns a Buffer holding up to capacity batches (<= 0 means
// DefaultBufferSize).
func NewBuffer(capacity int) *Buffer {
	if capacity <= 0 {
		capacity = DefaultBufferSize
	}
	return &Buffer{ents: make([]Entry, capacity)}
}

// Cap is the number of batches the buffer can hold.
func (b *Buffer) Cap() int { return len(b.ents) }

// Len is the number of batches held.
func (b *Buffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

// Add appends a batch, evicting the oldest when full. Sequences must grow; a
// sequence not above the newest one means the publisher started a new stream,
// so the buffer is emptied first (a replay never mixes two streams). Gaps are
// allowed: a batch that failed to publish is not buffered, as in vLLM.
func (b *Buffer) Add(seq uint64, topic, payload []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n > 0 && seq <= b.at(b.n-1).Seq {
		b.resetLocked()
	}
	if b.n == len(b.ents) {
		b.ents[b.head] = Entry{}
		b.head = (b.head + 1) % len(b.ents)
		b.n--
	}
	*b.at(b.n) = Entry{Seq: seq, Topic: topic, Payload: payload}
	b.n++
}

// Bounds returns the oldest and newest buffered sequences; ok is false when
// the buffer is empty.
func (b *Buffer) Bounds() (oldest, newest uint64, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n == 0 {
		return 0, 0, false
	}
	return b.at(0).Seq, b.at(b.n - 1).Seq, true
}

// From appends to dst every buffered entry with Seq >= start, oldest first,
// and returns the extended slice. The entries share the buffered slices.
func (b *Buffer) From(start uint64, dst []Entry) []Entry {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := sort.Search(b.n, func(i int) bool { return b.at(i).Seq >= start })
	for ; i < b.n; i++ {
		dst = append(dst, *b.at(i))
	}
	return dst
}

// Reset empties the buffer.
func (b *Buffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.resetLocked()
}

func (b *Buffer) resetLocked() {
	clear(b.ents)
	b.head, b.n = 0, 0
}

// at returns the i-th oldest entry; the caller holds mu.
func (b *Buffer) at(i int) *Entry {
	return &b.ents[(b.head+i)%len(b.ents)]
}
