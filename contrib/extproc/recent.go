package extproc

import (
	"sync"
	"time"
)

// recentSize is how many streams the status page lists.
const recentSize = 16

// streamRecord is one ext_proc stream as the status page lists it.
type streamRecord struct {
	Time            time.Time
	RequestID       string
	Path            string
	Model           string
	Endpoints       string // the pick and its fallbacks, as sent to Envoy
	Served          string // the endpoint Envoy reported; "" when it reported none
	PromptTokens    int
	PredictedCached int
	UsedCache       bool
	CacheMode       string // precise, approximate or blind
	Outcome         string
	Result          string
}

// recentStreams is a ring of the latest streamRecords.
type recentStreams struct {
	mu   sync.Mutex
	ring [recentSize]streamRecord
	n    int
}

func (r *recentStreams) add(rec streamRecord) {
	r.mu.Lock()
	r.ring[r.n%recentSize] = rec
	r.n++
	r.mu.Unlock()
}

// list returns the records, newest first.
func (r *recentStreams) list() []streamRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := min(r.n, recentSize)
	out := make([]streamRecord, 0, k)
	for i := 1; i <= k; i++ {
		out = append(out, r.ring[(r.n-i)%recentSize])
	}
	return out
}
