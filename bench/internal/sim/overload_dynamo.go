package sim

import (
	"container/heap"
	"fmt"
)

// DynamoQueueConfig is Dynamo's router queue as the overload study models
// it, from Dynamo's router documentation (configuration and tuning,
// priority scheduling, request rejection) and its scheduler queue source
// (lib/llm/src/kv_router/queue.rs):
//
//   - --router-queue-threshold is a fraction of each worker's
//     max_num_batched_tokens. While every worker's active prefill tokens (the
//     router's own count of prompt tokens it routed, less their cached
//     prefix, not yet prefilled) exceed threshold × max_num_batched_tokens,
//     a new request is parked in the router's pending queue instead of being
//     scheduled; when a request's prefill completes or it ends, the queue
//     is drained while some worker is below the threshold, each released
//     request going through the usual cost model. The documented default is
//     4.0 (earlier releases documented 2.0).
//   - --router-queue-policy fcfs (the default) orders the queue by
//     arrival; without a policy file the one synthetic policy class applies
//     the requests' strict_priority, an unsigned tier of which higher tiers
//     always go first. The study gives interactive requests tier 1 and batch
//     tier 0, the most Dynamo's defaults can do with two classes. (Policy
//     classes with deficit round robin between them need a policy file and
//     are not modelled; Dynamo keys them by class, not by tenant.)
//   - busy thresholds (HTTP 529 "all workers busy") are each disabled by
//     default, so nothing is rejected: Dynamo's default sheds nothing.
//
// What is not modelled: WSPT ordering, the soft priority's queue jump,
// queue-time limits (Dynamo has none by default), and the worker-side
// priority scheduling of the engines.
type DynamoQueueConfig struct {
	// Threshold is --router-queue-threshold; 0 turns the queue off.
	Threshold float64 `json:"threshold"`
	// StrictPriority gives interactive requests a higher strict_priority
	// tier than batch requests.
	StrictPriority bool `json:"strictPriority"`
}

// DefaultDynamoQueue is Dynamo's documented default threshold (4.0) with
// the classes mapped to strict-priority tiers.
func DefaultDynamoQueue() DynamoQueueConfig {
	return DynamoQueueConfig{Threshold: 4.0, StrictPriority: true}
}

func (c DynamoQueueConfig) validate() error {
	if !(c.Threshold >= 0) {
		return fmt.Errorf("%w: dynamoQueue.threshold %v must be >= 0", ErrInvalidConfig, c.Threshold)
	}
	return nil
}

// dynamoQueue is the pending queue of the dynamo+queue policy.
type dynamoQueue struct {
	cfg      DynamoQueueConfig
	d        *dynamo
	limit    float64 // threshold × max_num_batched_tokens, in tokens
	pending  dynamoPending
	a, b, bt int // waiting per tenant and batch
}

func newDynamoQueue(cfg DynamoQueueConfig, d *dynamo, maxBatched int) *dynamoQueue {
	return &dynamoQueue{cfg: cfg, d: d, limit: cfg.Threshold * float64(maxBatched)}
}

// allBusy reports whether every worker's active prefill tokens exceed the
// threshold (never with the queue off).
func (q *dynamoQueue) allBusy() bool {
	if q.cfg.Threshold <= 0 {
		return false
	}
	for _, p := range q.d.prefill {
		if float64(p) <= q.limit {
			return false
		}
	}
	return true
}

// enqueue parks rq if every worker is busy; false: schedule it now.
func (q *dynamoQueue) enqueue(rq *overloadReq) bool {
	if !q.allBusy() {
		return false
	}
	tier := 0
	if q.cfg.StrictPriority && rq.class == ClassInteractive {
		tier = 1
	}
	heap.Push(&q.pending, dynamoEntry{rq: rq, tier: tier})
	q.count(rq, 1)
	return true
}

// release pops the next request to schedule while some worker has room.
func (q *dynamoQueue) release() *overloadReq {
	if len(q.pending) == 0 || q.allBusy() {
		return nil
	}
	rq := heap.Pop(&q.pending).(dynamoEntry).rq
	q.count(rq, -1)
	return rq
}

func (q *dynamoQueue) count(rq *overloadReq, n int) {
	switch rq.tenant {
	case TenantA:
		q.a += n
	case TenantB:
		q.b += n
	default:
		q.bt += n
	}
}

// dynamoEntry is one parked request: higher tier first, then arrival.
type dynamoEntry struct {
	rq   *overloadReq
	tier int
}

type dynamoPending []dynamoEntry

func (h dynamoPending) Len() int { return len(h) }
func (h dynamoPending) Less(i, j int) bool {
	if h[i].tier != h[j].tier {
		return h[i].tier > h[j].tier
	}
	return h[i].rq.id < h[j].rq.id
}
func (h dynamoPending) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *dynamoPending) Push(x any)   { *h = append(*h, x.(dynamoEntry)) }
func (h *dynamoPending) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
