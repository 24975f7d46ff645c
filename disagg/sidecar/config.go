package sidecar

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/kvroute/kvroute/internal/bytebudget"
	"github.com/kvroute/kvroute/telemetry"
)

// Defaults of Config.
const (
	DefaultPrefillTimeout      = 30 * time.Second
	DefaultMaxBodyBytes        = 32 << 20
	DefaultMaxPrefillRespBytes = 1 << 20
	DefaultPrefillerScheme     = "http"
	// DefaultBodyReadTimeout is the default of Config.BodyReadTimeout, the
	// kvroute gateway's.
	DefaultBodyReadTimeout = 30 * time.Second
	// DefaultResponseWriteTimeout is the default of
	// Config.ResponseWriteTimeout, the kvroute gateway's.
	DefaultResponseWriteTimeout = time.Minute
	// DefaultMaxBodyBytesInFlight is the default of
	// Config.MaxBodyBytesInFlight, the kvroute gateway's: 512 MiB, sixteen
	// bodies at DefaultMaxBodyBytes or thousands of ordinary prompts.
	DefaultMaxBodyBytesInFlight = bytebudget.DefaultBodyBytesInFlight
)

// Config configures an Exchange (and a Handler). The zero value works: every
// zero field takes its default.
type Config struct {
	// DecoderURL is the local decode engine ("http://127.0.0.1:8001"); only
	// the Handler uses it.
	DecoderURL string `json:"decoderURL"`
	// PrefillTimeout bounds the prefill step (connect to last byte); past it
	// the request falls back to a local prefill. Default 30s.
	PrefillTimeout time.Duration `json:"prefillTimeout"`
	// MaxBodyBytes bounds the client request body: the Exchange's (Prefill
	// refuses a larger one with ErrTooLarge; PrefillWithin, whose caller
	// took it under a larger limit of its own, sends it to no prefiller,
	// ReasonBodyTooLarge), and every request a Handler serves (each is read
	// whole before it goes to the decoder; a larger one is answered 413).
	// Default 32 MiB.
	MaxBodyBytes int64 `json:"maxBodyBytes"`
	// MaxPrefillResponseBytes bounds the prefiller's answer (one token and
	// the transfer parameters). Default 1 MiB.
	MaxPrefillResponseBytes int64 `json:"maxPrefillResponseBytes"`
	// PrefillerScheme is the scheme used to reach host:port. Default "http".
	PrefillerScheme string `json:"prefillerScheme"`
	// BodyReadTimeout bounds, in a Handler, the reading of a request's
	// body from the end of its header: a client that has not sent it
	// whole by then is answered 408 and its connection closed, so that a
	// slow or stalled client cannot hold a connection and its buffer for as
	// long as it likes. Default 30s. Only a Handler reads bodies, so the
	// field is not part of Config's JSON (a gateway's exchange block).
	BodyReadTimeout time.Duration `json:"-"`
	// MaxBodyBytesInFlight bounds the request body bytes a Handler holds
	// at once, over all requests: the bodies as they came and the copies
	// a split makes of them (a wide body's UTF-8 copy; during the prefill
	// step its parsed members and the prefill body, so that a split holds
	// about three times its body then; while the decoder answers, the
	// decode body in place of the client's). A split whose copies find no
	// room goes to the decoder as it came, for a local prefill counted as
	// ReasonBodyBudget, before the prefiller is sent anything; a body that
	// finds no room itself (or a split's that needs a copy to go to the
	// decoder alone: one with kv_transfer_params of its own to drop, or a
	// UTF-16 or UTF-32 one) is answered 503 at once (Retry-After), so
	// that many concurrent clients, each within MaxBodyBytes, cannot
	// together grow the sidecar's memory without bound. It may not be
	// below MaxBodyBytes (a split body over a third of it then always
	// prefills locally).
	// Default 512 MiB, or MaxBodyBytes when larger. A Handler's only, like
	// BodyReadTimeout.
	MaxBodyBytesInFlight int64 `json:"-"`
	// ResponseWriteTimeout bounds, in a Handler, how long each write of a
	// response to the client may wait for the client to take it. A client
	// that stops reading (a stalled connection, a stream it never drains)
	// would otherwise hold its request open for as long as it keeps the
	// connection: its body's share of MaxBodyBytesInFlight, which other
	// clients' bodies then find full, and its decoder request. Past it the
	// response is cut, the decoder request ended, and the request counted
	// as client_stalled. The deadline restarts at every write, so a slow
	// stream the client keeps reading is never cut. Default 1m, the
	// kvroute gateway's. A Handler's only, like BodyReadTimeout.
	ResponseWriteTimeout time.Duration `json:"-"`
	// AllowClientKVTransferParams passes on, in a Handler, the
	// kv_transfer_params member a client's body carries on a request it
	// does not split, as the kvroute gateway's field of the name does. By
	// default the Handler removes it from every request (counted in
	// kvroute_sidecar_client_transfer_params_removed_total): vLLM's KV
	// connectors act on it, and a client's do_remote_prefill with its own
	// remote_host would make the decoder pull KV blocks from whatever
	// address the client names. A split request's transfer parameters are
	// the prefiller's; one whose prefill step fails and falls back to a
	// local prefill is not split and keeps the client's, as when no
	// prefiller is named. Set it only behind a trusted component that sets
	// them itself. A Handler's only, like BodyReadTimeout.
	AllowClientKVTransferParams bool `json:"-"`
}

func (c Config) withDefaults() (Config, error) {
	if c.PrefillTimeout == 0 {
		c.PrefillTimeout = DefaultPrefillTimeout
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxPrefillResponseBytes == 0 {
		c.MaxPrefillResponseBytes = DefaultMaxPrefillRespBytes
	}
	if c.PrefillerScheme == "" {
		c.PrefillerScheme = DefaultPrefillerScheme
	}
	if c.BodyReadTimeout == 0 {
		c.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if c.ResponseWriteTimeout == 0 {
		c.ResponseWriteTimeout = DefaultResponseWriteTimeout
	}
	if c.MaxBodyBytesInFlight == 0 {
		c.MaxBodyBytesInFlight = max(DefaultMaxBodyBytesInFlight, c.MaxBodyBytes)
	}
	switch {
	case c.PrefillTimeout < 0:
		return c, fmt.Errorf("sidecar: prefillTimeout %v < 0", c.PrefillTimeout)
	case c.BodyReadTimeout < 0:
		return c, fmt.Errorf("sidecar: bodyReadTimeout %v < 0", c.BodyReadTimeout)
	case c.ResponseWriteTimeout < 0:
		return c, fmt.Errorf("sidecar: responseWriteTimeout %v < 0", c.ResponseWriteTimeout)
	case c.MaxBodyBytes < 0 || c.MaxPrefillResponseBytes < 0 || c.MaxBodyBytesInFlight < 0:
		return c, errors.New("sidecar: maxBodyBytes, maxPrefillResponseBytes and maxBodyBytesInFlight must be positive")
	case c.MaxBodyBytesInFlight < c.MaxBodyBytes:
		return c, fmt.Errorf("sidecar: maxBodyBytesInFlight %d is below maxBodyBytes %d: a body at the limit could never be served", c.MaxBodyBytesInFlight, c.MaxBodyBytes)
	case c.PrefillerScheme != "http" && c.PrefillerScheme != "https":
		return c, fmt.Errorf("sidecar: prefillerScheme %q is not http or https", c.PrefillerScheme)
	}
	return c, nil
}

// Options are an Exchange's injected dependencies; the zero value is valid.
type Options struct {
	// Set is the exchange's observability, as every kvroute component
	// takes it: Registerer receives the kvroute_sidecar_* metrics (nil
	// registers none; all or none, see package telemetry), Logger the
	// fallbacks and errors (nil discards). The exchange has no spans and no
	// timers of its own: TracerProvider and Clock are not read
	// (Result.PrefillDuration is measured on the wall clock, to be
	// reported).
	telemetry.Set
	// Client sends the prefill requests (and, in a Handler, carries the
	// decoder's transport); nil uses a private client with its own
	// transport, closed by Close, which reaches every address directly
	// (no proxy from the environment) and keeps as many idle connections
	// to a host as were in flight to it at once. The Exchange uses a copy of it that
	// follows no redirect, whatever the given client's CheckRedirect.
	Client *http.Client
	// AllowTarget, when set, vets every prefiller address (a valid
	// host:port) before it is contacted; a refused one falls back to a local
	// prefill (ReasonNotAllowed). It must be safe for concurrent use. Nil
	// allows every address: the header then must come from a trusted router.
	AllowTarget func(hostPort string) bool
}
