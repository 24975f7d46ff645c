package tokenload

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/kvroute/kvroute/telemetry"
	"github.com/prometheus/client_golang/prometheus"
)

// Request-table defaults.
const (
	// DefaultMaxTrackedRequests bounds a RequestTable: 65,536 requests in
	// flight at once is far above what one gateway replica carries.
	DefaultMaxTrackedRequests = 65_536
	// DefaultTrackedRequestTTL is how long a request may stay in a
	// RequestTable without its Done: longer than any plausible streamed
	// response, short enough that a host that lost a request's end does not
	// carry its load for the life of the process.
	DefaultTrackedRequestTTL = 30 * time.Minute
	// MaxRequestIDBytes is the longest request ID a RequestTable accepts, so
	// its memory is bounded in bytes (Envoy's x-request-id is a 36-byte UUID).
	MaxRequestIDBytes = 256
)

// Errors of RequestTable.Register.
var (
	// ErrDuplicateRequestID means a request with the same ID is still in
	// flight; the new request was not registered.
	ErrDuplicateRequestID = errors.New("tokenload: request ID already in flight")
	// ErrInvalidRequestID means the ID is empty or longer than
	// MaxRequestIDBytes.
	ErrInvalidRequestID = errors.New("tokenload: invalid request ID")
	// ErrNilHandle means the handle is nil (a nil Handle or a nil
	// *Inflight): the host's mistake. Filed, a nil Handle would panic when
	// the table releases it on expiry or eviction, possibly on the expiry
	// timer's goroutine, and a nil *Inflight accounts for no request.
	ErrNilHandle = errors.New("tokenload: nil request handle")
)

// RequestTableConfig bounds a RequestTable.
type RequestTableConfig struct {
	// MaxRequests is the most requests tracked at once; registering one more
	// releases and drops the oldest (counted as evicted). 0 means
	// DefaultMaxTrackedRequests.
	MaxRequests int `json:"maxRequests"`
	// TTL is how long a request may stay without its Done (a Go duration
	// string in JSON, such as "30m"); then its load is released and it is
	// dropped (counted as expired). 0 means DefaultTrackedRequestTTL.
	TTL time.Duration `json:"ttl"`
}

// Options are the injected dependencies of this package's constructors; the
// zero value is valid.
type Options struct {
	// Set is the observability bundle (registerer, logger, tracer
	// provider, clock; see package telemetry):
	//   Registerer receives the metrics; nil registers nothing.
	//   Logger receives evictions and expiries at warn level (once per
	//   interval); nil discards them.
	//   Clock is the clock of the TTL and of a RequestTable's expiry timer;
	//   nil is the wall clock.
	telemetry.Set
}

// Outcomes counted by a RequestTable in kvroute_tokenload_request_ids_total.
const (
	IDRegistered = "registered" // Register accepted the ID
	IDDuplicate  = "duplicate"  // Register refused an ID still in flight
	IDInvalid    = "invalid"    // Register refused an empty or over-long ID, or a nil handle
	IDUnknown    = "unknown"    // FirstChunk or Done for an ID not in flight
	IDExpired    = "expired"    // dropped after TTL without Done; its load released
	IDEvicted    = "evicted"    // dropped at MaxRequests without Done; its load released
)

var idOutcomes = []string{IDRegistered, IDDuplicate, IDInvalid, IDUnknown, IDExpired, IDEvicted}

// warnInterval spaces the table's warnings about dropped requests.
const warnInterval = time.Minute

// Handle is what a RequestTable files under a request ID: one dispatched
// request's accounting. *Inflight is one; a kvroute Router files its
// Decisions, so that dropping one ends the whole request (its load and its
// prediction). FirstChunk and Done must be idempotent and safe for
// concurrent use; the table calls Done once it dropped the entry, possibly
// under its lock, so Done must be quick and must not call back into the
// table. Endpoint names the request's endpoint in the table's warnings.
type Handle interface {
	FirstChunk()
	Done()
	Endpoint() string
}

// RequestTable makes in-flight accounting addressable by request ID, for
// hosts that see a request's stages in separate callbacks with only its ID in
// hand (Envoy ext_proc's request-headers, response-headers, response-body and
// stream-end messages). Register files a dispatched request's Handle (such
// as its Inflight) under its ID; FirstChunk and Done release through it,
// exactly once however often they are called, alongside (and
// interchangeably with) the handle's own methods. Unknown and repeated IDs
// are counted and change nothing.
//
// The table is bounded: at most MaxRequests entries, each at most TTL old. A
// request that is never finished is released and dropped when it expires or
// when the table is full and it is the oldest, so a host that loses a
// request's end costs at most TTL of phantom load on one endpoint, never a
// leak. Memory is at most MaxRequests × (MaxRequestIDBytes + ~150 bytes).
// Expiry runs on every Register, oldest first, and on one timer of the
// injected clock (Options.Clock), armed while the table is not empty for
// when its oldest entry expires: a lost request is released within its TTL
// even when nothing more is registered (traffic stopped, or an admission
// stage queues every new request because that very phantom load saturates
// the endpoint). The timer is an AfterFunc: the table runs no goroutine
// between expiries, and the timer fires about once per TTL while requests
// come and go. Close stops it.
//
// Releasing an entry whose endpoint was removed from the Tracker touches only
// the orphaned counters (see Tracker.Remove). A RequestTable is safe for
// concurrent use.
type RequestTable struct {
	max int
	ttl time.Duration
	now func() time.Time
	log *slog.Logger

	entries prometheus.Gauge
	ids     map[string]prometheus.Counter
	warned  map[string]time.Time // outcome → last warning, under mu

	clock telemetry.Clock

	mu      sync.Mutex
	m       map[string]*tableEntry
	head    tableEntry      // sentinel of the insertion-ordered ring (oldest first)
	timer   telemetry.Timer // the expiry timer (expire); armed while the table is not empty
	armed   bool
	closed  bool           // Close ran: the timer is not armed again
	pending sync.WaitGroup // expire calls armed or running, for Close

	set       telemetry.Set          // whose Registerer Close unregisters cs from
	cs        []prometheus.Collector // what NewRequestTable registered
	closeOnce sync.Once
}

type tableEntry struct {
	id         string
	h          Handle
	at         time.Time
	prev, next *tableEntry
}

// validate reports the first invalid setting of c (NewRequestTable and
// LoadRequestTableConfig refuse it).
func (c RequestTableConfig) validate() error {
	switch {
	case c.MaxRequests < 0:
		return fmt.Errorf("tokenload: maxRequests %d is negative", c.MaxRequests)
	case c.TTL < 0:
		return fmt.Errorf("tokenload: ttl %v is negative", c.TTL)
	}
	return nil
}

// NewRequestTable returns an empty table bounded by cfg (its zero fields
// mean the defaults; a negative one is an error). With opts.Registerer set
// it registers kvroute_tokenload_request_ids_total{outcome} and the gauge
// kvroute_tokenload_request_table_entries (Close unregisters them).
func NewRequestTable(cfg RequestTableConfig, opts Options) (*RequestTable, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.MaxRequests == 0 {
		cfg.MaxRequests = DefaultMaxTrackedRequests
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTrackedRequestTTL
	}
	clk := opts.Clk()
	t := &RequestTable{max: cfg.MaxRequests, ttl: cfg.TTL, now: clk.Now, clock: clk, log: opts.Log(),
		m: map[string]*tableEntry{}, ids: map[string]prometheus.Counter{}, warned: map[string]time.Time{}}
	t.head.prev, t.head.next = &t.head, &t.head
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_tokenload_request_ids_total",
		Help: "Request-ID accounting events: registered, duplicate and invalid IDs refused, unknown IDs released, and requests dropped without their Done (expired, evicted) whose load was released.",
	}, []string{"outcome"})
	for _, o := range idOutcomes {
		t.ids[o] = vec.WithLabelValues(o)
	}
	t.entries = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kvroute_tokenload_request_table_entries",
		Help: "Requests in flight addressable by ID.",
	})
	cs := []prometheus.Collector{vec, t.entries}
	if err := opts.Set.Register(cs...); err != nil {
		return nil, err
	}
	t.set, t.cs = opts.Set, cs
	return t, nil
}

// Close stops the expiry timer, waiting for an expiry under way, and
// unregisters the metrics NewRequestTable registered, so a table can be
// built again on the same registry. The table keeps working, its entries
// then expiring only on Register; its counts are just not exported. Close
// is idempotent.
func (t *RequestTable) Close() {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		t.closed = true
		if t.armed && t.timer.Stop() {
			t.armed = false
			t.pending.Done()
		}
		t.mu.Unlock()
		t.pending.Wait()
		t.set.Unregister(t.cs...)
	})
}

// Register files h, a dispatched request's handle, under id. It fails with
// ErrInvalidRequestID for an empty or over-long id, with ErrNilHandle for a
// nil h (or a nil *Inflight) and with ErrDuplicateRequestID while another
// request with that id is in flight; h is then untouched. Before inserting, expired entries are released and
// dropped, and at MaxRequests the oldest entry is.
func (t *RequestTable) Register(id string, h Handle) error {
	if id == "" || len(id) > MaxRequestIDBytes {
		t.ids[IDInvalid].Inc()
		return fmt.Errorf("%w: %d bytes (1 to %d allowed)", ErrInvalidRequestID, len(id), MaxRequestIDBytes)
	}
	if in, ok := h.(*Inflight); h == nil || ok && in == nil {
		t.ids[IDInvalid].Inc()
		return fmt.Errorf("%w for request %q", ErrNilHandle, id)
	}
	now := t.now()
	t.mu.Lock()
	t.expireLocked(now)
	if _, dup := t.m[id]; dup {
		t.mu.Unlock()
		t.ids[IDDuplicate].Inc()
		return fmt.Errorf("%w: %q", ErrDuplicateRequestID, id)
	}
	var evicted *tableEntry
	if len(t.m) >= t.max {
		evicted = t.head.next
		t.unlinkLocked(evicted)
	}
	e := &tableEntry{id: id, h: h, at: now}
	e.prev, e.next = t.head.prev, &t.head
	t.head.prev.next, t.head.prev = e, e
	t.m[id] = e
	t.entries.Set(float64(len(t.m)))
	t.armLocked(now)
	t.mu.Unlock()
	t.ids[IDRegistered].Inc()
	if evicted != nil {
		evicted.h.Done()
		t.dropped(IDEvicted, evicted, now)
	}
	return nil
}

// expireLocked drops the entries older than the TTL, oldest first. Their
// handles are released under the lock (a few atomic operations each).
func (t *RequestTable) expireLocked(now time.Time) {
	for e := t.head.next; e != &t.head && now.Sub(e.at) >= t.ttl; e = t.head.next {
		t.unlinkLocked(e)
		e.h.Done()
		t.droppedLocked(IDExpired, e, now)
	}
}

// armLocked arms the expiry timer for when the oldest entry expires, unless
// it is armed (it then re-arms itself for the oldest entry when it fires),
// the table is empty or closed.
func (t *RequestTable) armLocked(now time.Time) {
	if t.armed || t.closed || len(t.m) == 0 {
		return
	}
	d := max(t.head.next.at.Add(t.ttl).Sub(now), 0)
	t.armed = true
	t.pending.Add(1)
	if t.timer == nil {
		t.timer = t.clock.AfterFunc(d, t.expire)
		return
	}
	t.timer.Reset(d)
}

// expire is the expiry timer: it drops the expired entries and re-arms for
// the oldest left.
func (t *RequestTable) expire() {
	defer t.pending.Done()
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.armed = false
	if t.closed {
		return
	}
	t.expireLocked(now)
	t.armLocked(now)
}

func (t *RequestTable) unlinkLocked(e *tableEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
	delete(t.m, e.id)
	t.entries.Set(float64(len(t.m)))
}

func (t *RequestTable) dropped(outcome string, e *tableEntry, now time.Time) {
	t.mu.Lock()
	t.droppedLocked(outcome, e, now)
	t.mu.Unlock()
}

// droppedLocked counts a request dropped without its Done and warns at most
// once per warnInterval per outcome.
func (t *RequestTable) droppedLocked(outcome string, e *tableEntry, now time.Time) {
	t.ids[outcome].Inc()
	if last, ok := t.warned[outcome]; ok && now.Sub(last) < warnInterval {
		return
	}
	t.warned[outcome] = now
	t.log.Warn("tokenload: request dropped without its Done; its load was released (the host lost the request's end, or the table is too small)",
		"outcome", outcome, "request", e.id, "endpoint", e.h.Endpoint(), "age", now.Sub(e.at),
		"maxRequests", t.max, "ttl", t.ttl)
}

// FirstChunk releases the prompt tokens of the request filed under id (see
// Inflight.FirstChunk); the request stays in the table until Done. It
// reports whether id was in flight; an unknown id is counted and changes
// nothing.
func (t *RequestTable) FirstChunk(id string) bool {
	t.mu.Lock()
	e := t.m[id]
	t.mu.Unlock()
	if e == nil {
		t.ids[IDUnknown].Inc()
		return false
	}
	e.h.FirstChunk()
	return true
}

// Done releases the request filed under id (see Inflight.Done) and drops it
// from the table. It reports whether id was in flight; an unknown or already
// finished id is counted and changes nothing.
func (t *RequestTable) Done(id string) bool {
	t.mu.Lock()
	e := t.m[id]
	if e != nil {
		t.unlinkLocked(e)
	}
	t.mu.Unlock()
	if e == nil {
		t.ids[IDUnknown].Inc()
		return false
	}
	e.h.Done()
	return true
}

// Get returns the handle filed under id, which stays filed (its Done
// unfiles it when it goes through Forget, as a kvroute Decision's does). It
// reports whether id was in flight; an unknown id is counted and returns
// nil.
func (t *RequestTable) Get(id string) (Handle, bool) {
	t.mu.Lock()
	e := t.m[id]
	t.mu.Unlock()
	if e == nil {
		t.ids[IDUnknown].Inc()
		return nil, false
	}
	return e.h, true
}

// Forget drops id from the table if it still holds h, without releasing
// anything: the caller released h itself (a Decision's own Done). It is not
// counted.
func (t *RequestTable) Forget(id string, h Handle) {
	t.mu.Lock()
	if e := t.m[id]; e != nil && e.h == h {
		t.unlinkLocked(e)
	}
	t.mu.Unlock()
}

// Len returns the number of requests in the table.
func (t *RequestTable) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}
