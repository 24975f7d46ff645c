package session

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/textproto"
	"time"

	"github.com/kvroute/kvroute/affinity"
	"github.com/kvroute/kvroute/internal/jsonconf"
	"github.com/kvroute/kvroute/tokenload"
)

// Defaults applied by New to zero Config fields.
const (
	// DefaultTTL is how long a session's endpoint is remembered after its
	// last turn was routed: an agent's tool call or a user's reply
	// usually comes within minutes; beyond that the engine has likely
	// evicted the session's blocks anyway.
	DefaultTTL = 10 * time.Minute
	// DefaultMaxEntries bounds the store: at most EntryBytes each, so at
	// most 26 MiB (about 20 MiB measured) with the default.
	DefaultMaxEntries = 1 << 18
	// DefaultMaxKeyBytes bounds a session key taken from a header or a
	// cookie; a longer value is malformed.
	DefaultMaxKeyBytes = 256
	// DefaultWeight is the scorer's weight beside the token-load scorer's
	// (the router's Config.LoadWeight, 1 by default).
	DefaultWeight = 1.0
	// DefaultCookie is the cookie llm-d's session-affinity scorer sets
	// (its value names the endpoint that served the last turn); kvroute
	// takes the value as a session key, so a client that carries it keeps
	// its stickiness when moved from llm-d's endpoint picker to kvroute.
	DefaultCookie = "llm-d-session"
	// DefaultMaxPrefillBacklog is how much prefill work in flight, in time
	// at the endpoints' peak prefill throughput, leaves a session's
	// endpoint no session score: 2 s, the admission stage's saturation
	// threshold (about 32,000 tokens at the affinity filter's calibrated
	// 15,928 tokens/s).
	DefaultMaxPrefillBacklog = 2 * time.Second
)

// DefaultHeaders are the headers a session key is read from, in order,
// when Config.Headers is empty: kvroute's own, Dynamo's (which agent
// clients such as AIPerf send) and SGLang's gateway's routing key.
var DefaultHeaders = []string{"x-session-id", "x-dynamo-session-id", "x-smg-routing-key"}

// EntryBytes bounds the memory one stored session takes in a full store,
// measured by TestEntryBytesAllocated (store_test.go; 66 to 100 bytes depending on
// where the map's and the entries' growth steps fall, about 80 at
// DefaultMaxEntries): the entry (key, endpoint, time, list links) and its
// share of the map; the endpoint's name is shared with the endpoint list.
const EntryBytes = 104

// Config configures session affinity. The zero value is valid: every zero
// field takes its default. JSON keys are the json tags; durations are Go
// duration strings; unknown keys are an error (LoadConfig).
type Config struct {
	// Headers are the request headers a session key is read from, first
	// present and well-formed one wins; empty means DefaultHeaders.
	Headers []string `json:"headers"`
	// Cookie is the cookie read after the headers; "" means DefaultCookie,
	// "-" reads no cookie.
	Cookie string `json:"cookie"`
	// SetCookie, on by default (nil) whenever a cookie is read, makes the
	// host answer a request that had no session key (none sent, and with
	// Derive none derived: a derived key keeps each conversation apart,
	// which a per-client cookie read before derivation would undo) with
	// the session cookie naming the endpoint that served it, in llm-d's
	// format (ResponseCookie, CookieValue): a client that keeps cookies
	// then sticks without sending a header. false sets none; true with
	// Cookie "-" is an error.
	SetCookie *bool `json:"setCookie"`
	// CookieMaxAge is the cookie's Max-Age, whole seconds (a fraction is
	// an error); 0, the default, makes it a session cookie (no Max-Age),
	// as llm-d's default.
	CookieMaxAge time.Duration `json:"cookieMaxAge"`
	// Derive derives a key from the request body when no header or cookie
	// carries one (opt-in): the block key of the conversation's opening,
	// every message up to and including the first user message, which
	// every later turn repeats, as the Router computes block keys (see the
	// package documentation). Clients that send no session header then
	// still stick; two conversations that open identically share a key
	// (and only a preference).
	Derive bool `json:"derive"`
	// Strict refuses a request whose session header or cookie is malformed
	// (ErrInvalidKey: the gateway answers 400) instead of routing it
	// without a session, which is the default (counted in
	// kvroute_session_keys_total{source="invalid"}).
	Strict bool `json:"strict"`
	// MaxKeyBytes bounds a header or cookie key; 0 means
	// DefaultMaxKeyBytes.
	MaxKeyBytes int `json:"maxKeyBytes"`
	// TTL is how long a session's endpoint is remembered after its last
	// turn; 0 means DefaultTTL.
	TTL time.Duration `json:"ttl"`
	// MaxEntries bounds the sessions stored; 0 means DefaultMaxEntries, at
	// most 2³¹−1 (a shard indexes its entries with 32 bits).
	// The store is split into shards by the key's hash (16; fewer, down to
	// one, below 16,384 entries, so that each holds at least 1,024), each
	// holding its share of MaxEntries (the shares sum to it), and a new
	// session in a full shard forgets that shard's least recently routed
	// one (counted): the least recently routed overall with one shard
	// (MaxEntries below 2,048), approximately otherwise, as a shard can
	// fill before the store does. Memory is at most MaxEntries ×
	// EntryBytes; with Derive the openings' memo, a second store of the
	// same bound whose entries also hold their derived key, adds at most
	// MaxEntries × (EntryBytes + 24).
	MaxEntries int `json:"maxEntries"`
	// Weight is the session scorer's weight in the sum of scores; 0 means
	// DefaultWeight.
	Weight float64 `json:"weight"`
	// SaturationTokens is the in-flight token load (the endpoint's
	// committed tokens plus this request's uncached ones) at which the
	// session's endpoint gets no session score any more: the scorer gives
	// the endpoint's headroom below it, 1 − load/SaturationTokens. 0 means
	// DefaultMaxPrefillBacklog at affinity.DefaultPeakPrefillThroughput.
	SaturationTokens int64 `json:"saturationTokens"`
	// OpenRequestTokens is the load, in tokens, each request still open on
	// the session's endpoint adds to that load: a streaming request keeps
	// its KV blocks and a decode slot although its prompt tokens left the
	// committed load at its first chunk, so an endpoint full of decoding
	// sessions is saturated too. 0 means tokenload.DefaultOpenRequestTokens
	// (the router's default); negative counts open requests as nothing.
	OpenRequestTokens int64 `json:"openRequestTokens"`
}

// ErrInvalidConfig is wrapped by every configuration error.
var ErrInvalidConfig = errors.New("session: invalid config")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}

// maxHeaders bounds Config.Headers.
const maxHeaders = 16

// Validate reports the first invalid field, naming its JSON key.
func (c Config) Validate() error {
	if len(c.Headers) > maxHeaders {
		return invalid("headers lists %d names, at most %d", len(c.Headers), maxHeaders)
	}
	for i, h := range c.Headers {
		if !validToken(h) {
			return invalid("headers[%d] %q is not a header name", i, h)
		}
	}
	switch {
	case c.Cookie != "" && c.Cookie != "-" && !validToken(c.Cookie):
		return invalid("cookie %q is not a cookie name", c.Cookie)
	case c.Cookie == "-" && c.SetCookie != nil && *c.SetCookie:
		return invalid(`setCookie is true but cookie is "-" (no cookie): there is no cookie to set`)
	case c.CookieMaxAge < 0:
		return invalid("cookieMaxAge must be >= 0, got %v", c.CookieMaxAge)
	case c.CookieMaxAge%time.Second != 0:
		return invalid("cookieMaxAge must be whole seconds (Max-Age), got %v", c.CookieMaxAge)
	case c.MaxKeyBytes < 0 || c.MaxKeyBytes > 4096:
		return invalid("maxKeyBytes must be in [0, 4096], got %d", c.MaxKeyBytes)
	case c.TTL < 0:
		return invalid("ttl must be >= 0, got %v", c.TTL)
	case c.MaxEntries < 0 || c.MaxEntries > math.MaxInt32:
		return invalid("maxEntries must be in [0, %d], got %d", math.MaxInt32, c.MaxEntries)
	case math.IsNaN(c.Weight) || math.IsInf(c.Weight, 0) || c.Weight < 0:
		return invalid("weight must be a finite number >= 0, got %v", c.Weight)
	case c.SaturationTokens < 0:
		return invalid("saturationTokens must be >= 0, got %d", c.SaturationTokens)
	}
	return nil
}

// withDefaults returns c with every zero field set to its default and the
// header names canonical.
func (c Config) withDefaults() Config {
	if len(c.Headers) == 0 {
		c.Headers = DefaultHeaders
	}
	hs := make([]string, len(c.Headers))
	for i, h := range c.Headers {
		hs[i] = textproto.CanonicalMIMEHeaderKey(h)
	}
	c.Headers = hs
	if c.Cookie == "" {
		c.Cookie = DefaultCookie
	}
	if c.MaxKeyBytes == 0 {
		c.MaxKeyBytes = DefaultMaxKeyBytes
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.MaxEntries == 0 {
		c.MaxEntries = DefaultMaxEntries
	}
	if c.Weight == 0 {
		c.Weight = DefaultWeight
	}
	if c.SaturationTokens == 0 {
		c.SaturationTokens = int64(DefaultMaxPrefillBacklog.Seconds() * affinity.DefaultPeakPrefillThroughput)
	}
	if c.OpenRequestTokens == 0 {
		c.OpenRequestTokens = tokenload.DefaultOpenRequestTokens
	}
	return c
}

// validToken reports whether s is a non-empty HTTP token (RFC 9110), as
// header and cookie names are.
func validToken(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-' || c == '_' || c == '.' || c == '!' || c == '#' || c == '$' || c == '%' || c == '&' ||
			c == '\'' || c == '*' || c == '+' || c == '^' || c == '`' || c == '|' || c == '~':
		default:
			return false
		}
	}
	return true
}

// LoadConfig decodes a JSON Config strictly (unknown keys and bare numbers
// as durations are errors naming their path) and validates it.
func LoadConfig(r io.Reader) (Config, error) {
	return jsonconf.Load(r, Config{}, jsonconf.Under(ErrInvalidConfig), Config.Validate)
}

// configFields is Config without its methods, so that decoding it does not
// recurse into Config.UnmarshalJSON.
type configFields Config

// UnmarshalJSON decodes c strictly wherever a Config is decoded (alone, or
// as the session section of a gateway configuration).
func (c *Config) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*configFields)(c))
}

// MarshalJSON encodes c with its durations as Go duration strings.
func (c Config) MarshalJSON() ([]byte, error) {
	return jsonconf.Marshal(configFields(c))
}
