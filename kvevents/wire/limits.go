package wire

// Limits bound what one message may make the decoder do. Every limit is
// checked before anything is allocated for the thing it limits, and a length
// the input claims is also checked against the bytes actually remaining, so
// a hostile or corrupt payload cannot make the decoder allocate more than a
// small multiple of its own size. Zero or negative fields take the default.
type Limits struct {
	// MaxPayloadBytes bounds the msgpack payload (frame 2). Default 64 MiB.
	MaxPayloadBytes int `json:"maxPayloadBytes"`
	// MaxEventsPerBatch bounds the events of one batch. Default 1<<20.
	MaxEventsPerBatch int `json:"maxEventsPerBatch"`
	// MaxHashesPerEvent bounds block_hashes (and extra_keys entries) of one
	// event. Default 1<<20.
	MaxHashesPerEvent int `json:"maxHashesPerEvent"`
	// MaxTokensPerEvent bounds token_ids of one event. Default 1<<24.
	MaxTokensPerEvent int `json:"maxTokensPerEvent"`
}

// Default limits: generous enough for any real engine step (a 1M-token
// prefill in one event at block size 1 still fits).
const (
	defaultMaxPayloadBytes   = 64 << 20
	defaultMaxEventsPerBatch = 1 << 20
	defaultMaxHashesPerEvent = 1 << 20
	defaultMaxTokensPerEvent = 1 << 24
)

// defaultLimits returns the default Limits.
func defaultLimits() Limits {
	return Limits{
		MaxPayloadBytes:   defaultMaxPayloadBytes,
		MaxEventsPerBatch: defaultMaxEventsPerBatch,
		MaxHashesPerEvent: defaultMaxHashesPerEvent,
		MaxTokensPerEvent: defaultMaxTokensPerEvent,
	}
}

// withDefaults replaces zero or negative fields by their default.
func (l Limits) withDefaults() Limits {
	d := defaultLimits()
	if l.MaxPayloadBytes <= 0 {
		l.MaxPayloadBytes = d.MaxPayloadBytes
	}
	if l.MaxEventsPerBatch <= 0 {
		l.MaxEventsPerBatch = d.MaxEventsPerBatch
	}
	if l.MaxHashesPerEvent <= 0 {
		l.MaxHashesPerEvent = d.MaxHashesPerEvent
	}
	if l.MaxTokensPerEvent <= 0 {
		l.MaxTokensPerEvent = d.MaxTokensPerEvent
	}
	return l
}
