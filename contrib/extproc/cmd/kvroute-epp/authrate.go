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
// ends, and a client-side limit on the Kubernetes client would then queue
// them, so that a scraper's review waited behind the stream's. Refused at
// once instead, a caller over the rate is answered 503 unreviewed; the
// reviews' own client is limited to what the bucket lets through
// (reviewClientLimits), so that client-go never queues them.
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
	burst := reviewBurst(rate)
	return &reviewBucket{rate: rate, burst: burst, have: burst, last: now}
}

// reviewBurst is the reviews a bucket of rate starts at once: two
// seconds' worth, at least one.
func reviewBurst(rate float64) float64 { return math.Max(1, math.Ceil(2*rate)) }

// requestsPerReview is the API requests a review makes at most: a
// TokenReview, then a SubjectAccessReview.
const requestsPerReview = 2

// reviewClientLimits is the client-side limit of the Kubernetes client the
// reviews of a bucket of rate go through: the requests of the reviews it
// starts, requestsPerReview each, at its rate and at once, so that the
// bucket alone bounds them and client-go does not queue what it let
// through (with client-go's default, 5 requests a second, a rate above
// 2.5 would be queued).
func reviewClientLimits(rate float64) clientLimits {
	return clientLimits{qps: float32(requestsPerReview * rate), burst: requestsPerReview * int(reviewBurst(rate))}
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

// maxRetryAfter caps the Retry-After of a caller refused over the rate:
// a rate the flag accepts may be tiny (one review a day), and a client
// told to come back in an hour asks again soon enough.
const maxRetryAfter = 3600

// retryAfter is the Retry-After, in whole seconds, of a caller refused
// over the rate: how long a token takes to come, at least one second and
// at most maxRetryAfter.
func (b *reviewBucket) retryAfter() string {
	return strconv.FormatFloat(math.Min(maxRetryAfter, math.Max(1, math.Ceil(1/b.rate))), 'f', 0, 64)
}
