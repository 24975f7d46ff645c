package main

import (
	"math"
	"strconv"
	"sync"
	"time"
)

// reviewBucket is a token bucket bounding the rate at which the metrics
// port starts reviews (--metrics-auth-review-rate): the in-flight limit
// alone would let a stream of unknown tokens start a review as each one
// ends, and client-go's own limit on the Kubernetes client (5 requests a
// second, 10 at once; a review is one or two requests) would then queue
// them, so that a scraper's review waited behind the stream's. Refused at
// once instead, a caller over the rate is answered 503 unreviewed.
type reviewBucket struct {
	rate  float64 // tokens added a second
	burst float64 // tokens held at most
	mu    sync.Mutex
	have  float64   // tokens held at last
	last  time.Time // when have was reckoned
}

// newReviewBucket returns a full bucket at now, of rate tokens a second
// holding two seconds' worth, at least one.
func newReviewBucket(rate float64, now time.Time) *reviewBucket {
	burst := math.Max(1, math.Ceil(2*rate))
	return &reviewBucket{rate: rate, burst: burst, have: burst, last: now}
}

// take takes a token at now, reporting whether there was one.
func (b *reviewBucket) take(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.After(b.last) {
		b.have = math.Min(b.burst, b.have+now.Sub(b.last).Seconds()*b.rate)
		b.last = now
	}
	if b.have < 1 {
		return false
	}
	b.have--
	return true
}

// retryAfter is the Retry-After, in whole seconds, of a caller refused
// over the rate: how long a token takes to come, at least one second.
func (b *reviewBucket) retryAfter() string {
	return strconv.FormatFloat(math.Max(1, math.Ceil(1/b.rate)), 'f', 0, 64)
}
