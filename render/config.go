package render

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/kvroute/kvroute/internal/jsonconf"
)

// Defaults of the llm-d router's token producer, which kvroute keeps so that
// tuned deployments carry over.
const (
	// DefaultTimeout is the budget of a completions render (both attempts).
	DefaultTimeout = 5 * time.Second
	// DefaultMMTimeout is the budget of a chat, Messages or Responses render
	// (via max(Timeout, MMTimeout)): multimodal inputs are fetched and
	// processed by the renderer and take longer.
	DefaultMMTimeout = 30 * time.Second
	// DefaultMaxResponseBytes caps a render response body. A 128k-token
	// prompt renders to well under 2 MiB of JSON; the cap only guards the
	// router against a hostile or broken server.
	DefaultMaxResponseBytes = 64 << 20
	// DefaultMaxIdleConnsPerHost is the default idle-connection cap per
	// renderer. The pool only ever holds as many connections as were in
	// flight to a host at once, so a cap above the offered concurrency
	// costs nothing at low load and keeps a busy router from closing and
	// redialing connections after every burst (a cap of 16 left ~800
	// sockets in TIME_WAIT within 15 s at 64 concurrent requests).
	DefaultMaxIdleConnsPerHost = 1024
	// DefaultAttemptTimeout caps each attempt, so that a hung first attempt
	// leaves time for the retry on another endpoint. (kvroute's own default;
	// the llm-d token producer has no per-attempt cap.)
	DefaultAttemptTimeout = 2 * time.Second
	// DefaultMaxConcurrency caps the renders in flight to one render
	// endpoint. A vLLM renderer tokenizes on about one core, so renders
	// beyond a few at once only queue inside it; 8 keeps a 49k-token render
	// (about 0.1 s of tokenization each) under a second in flight, well
	// inside the attempt cap, and does not bind for short prompts
	// (thousands of renders per second per endpoint). (kvroute's own
	// default; the llm-d token producer has no limit.)
	DefaultMaxConcurrency = 8
	// DefaultMaxQueueWait bounds how long a render waits for a free slot
	// before its request is routed by load: a tenth of the completions
	// budget (DefaultTimeout), instead of the whole budget a saturated
	// renderer would otherwise take. (kvroute's own default.)
	DefaultMaxQueueWait = DefaultTimeout / 10
)

// Mode says how Anthropic Messages and OpenAI Responses requests are rendered.
type Mode string

const (
	// ModeAuto probes the native render route once and falls back to legacy
	// only when the route is missing and chat-completions rendering works.
	// It is the default ("" means auto).
	ModeAuto Mode = "auto"
	// ModeNative sends the request as is to /v1/messages/render or
	// /v1/responses/render.
	ModeNative Mode = "native"
	// ModeLegacy translates the request into a chat-completions render call
	// for renderers older than the native routes. Deprecated by the upstream
	// router; a warning is logged once per Client and API.
	ModeLegacy Mode = "legacy"
)

func (m Mode) valid() bool {
	switch m {
	case "", ModeAuto, ModeNative, ModeLegacy:
		return true
	}
	return false
}

// Config configures a Client. The zero Config means the defaults (those
// DefaultConfig shows), applied by New: every field left at its zero value
// takes its default. The two settings whose zero is a setting of its own
// (OmitMMKwargs false, AttemptTimeout 0 = no per-attempt cap) are pointers,
// nil meaning the default, as in Kubernetes API types.
//
// JSON keys are the json tags below (the llm-d token producer's names);
// unknown keys are an error; durations are Go duration strings ("5s",
// "250ms"). Keys missing from the JSON keep the value the Config had before
// decoding (LoadConfig decodes over DefaultConfig, so that the result shows
// every default).
type Config struct {
	// URL is a fixed renderer base URL such as "http://localhost:8000". When
	// empty, the Client renders against the endpoints given to SetEndpoints.
	// With a fixed URL there is no retry (there is no other endpoint).
	URL string `json:"url,omitempty"`
	// ModelName is the base model name, used in mode probes, in the legacy
	// translations and by Check. Native bodies keep their own model.
	ModelName string `json:"modelName,omitempty"`
	// MessagesRenderMode selects how Anthropic Messages render. Default auto.
	MessagesRenderMode Mode `json:"messagesRenderMode"`
	// ResponsesRenderMode selects how OpenAI Responses render. Default auto.
	ResponsesRenderMode Mode `json:"responsesRenderMode"`
	// PrefillOnly edits the render copy of the body: max_tokens becomes 1,
	// max_completion_tokens is capped at 1 and min_tokens becomes 0 (a
	// Responses body rendered natively: max_output_tokens is capped at 1),
	// unless truncate_prompt_tokens is set. It keeps the renderer from
	// rejecting a prompt whose max_tokens would not fit the context (vLLM's
	// Responses clamps max_output_tokens instead; it is capped all the same,
	// and no max_tokens, which a Responses request does not have, is added).
	// Default false.
	PrefillOnly bool `json:"prefillOnly"`
	// OmitMMKwargs splices "return_mm_kwargs": false into the render copy of
	// the body so that multimodal tensors stay out of the response. Default
	// true; nil means the default.
	OmitMMKwargs *bool `json:"omitMMKwargs"`
	// Timeout is the budget of a completions render, both attempts included,
	// and the lower bound of the other budgets. Default 5 s; zero means the
	// default.
	Timeout time.Duration `json:"timeout"`
	// MMTimeout sets the budget of chat, Messages and Responses renders to
	// max(Timeout, MMTimeout). Default 30 s; zero means the default.
	MMTimeout time.Duration `json:"mmTimeout"`
	// AttemptTimeout caps each attempt at min(AttemptTimeout, remaining
	// budget), in a render another endpoint could retry (both its attempts,
	// as llm-d caps each): a render with a fixed URL, or to the only
	// endpoint serving its model, is one attempt with the whole budget (the
	// cap would only shorten it). Default 2 s
	// (DefaultAttemptTimeout); nil means the default. 0 means no cap, so a
	// hung first attempt can use the whole budget and leave nothing for the
	// retry.
	AttemptTimeout *time.Duration `json:"attemptTimeout"`
	// MaxResponseBytes caps the size of a render response body; a larger
	// body is a decode error. Default 64 MiB; zero means the default.
	MaxResponseBytes int64 `json:"maxResponseBytes"`
	// MaxIdleConnsPerHost caps the idle keep-alive connections kept per
	// renderer. Size it at or above the router's peak concurrent requests
	// per renderer; below that, connections are closed after a burst and
	// redialed in the next one. Default 1,024; zero means the default.
	MaxIdleConnsPerHost int `json:"maxIdleConnsPerHost"`
	// MaxConcurrency caps the renders in flight to each render endpoint;
	// a render beyond it waits for a slot (see MaxQueueWait). It also caps
	// the connections kept to each renderer's host:port, so a steady load
	// opens no connection beyond it (endpoints listed with one host:port
	// share that cap). Default 8 (DefaultMaxConcurrency); nil means the
	// default; 0 means no limit.
	MaxConcurrency *int `json:"maxConcurrency"`
	// MaxQueueWait bounds the wait for a render slot when every slot of
	// the chosen endpoint is taken and no other endpoint has one free: a
	// render that cannot start within it fails at once with
	// ReasonSaturated, and the router routes the request by load. Default
	// 500 ms (DefaultMaxQueueWait); nil means the default; 0 means no wait.
	MaxQueueWait *time.Duration `json:"maxQueueWait"`
	// Hedge sends a second render to another endpoint with a free slot when
	// the first has run longer than its endpoint's recent 95th-percentile
	// latency; the first answer wins and the other is canceled. Default
	// true; nil means the default.
	Hedge *bool `json:"hedge"`
}

// DefaultConfig shows the defaults a zero Config stands for, the llm-d
// token producer's: no fixed URL, auto modes, omitMMKwargs on, prefillOnly
// off, 5 s / 30 s budgets, a 64 MiB response cap and up to 1,024 idle
// connections per renderer; and kvroute's 2 s cap per attempt, 8 renders in
// flight per endpoint, 500 ms queue wait and hedging on.
func DefaultConfig() Config { return Config{}.WithDefaults() }

// ErrInvalidConfig is wrapped by every error Validate and LoadConfig return
// for an out-of-range configuration value (test with errors.Is).
var ErrInvalidConfig = errors.New("render: invalid config")

func invalidConfig(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}

// Validate reports the first invalid field, naming its JSON key.
func (c Config) Validate() error {
	if c.URL != "" {
		if err := validateBaseURL(c.URL); err != nil {
			return invalidConfig("url: %v", err)
		}
	}
	switch {
	case !c.MessagesRenderMode.valid():
		return invalidConfig("messagesRenderMode must be %q, %q or %q, got %q", ModeAuto, ModeNative, ModeLegacy, c.MessagesRenderMode)
	case !c.ResponsesRenderMode.valid():
		return invalidConfig("responsesRenderMode must be %q, %q or %q, got %q", ModeAuto, ModeNative, ModeLegacy, c.ResponsesRenderMode)
	case c.Timeout < 0:
		return invalidConfig("timeout must be > 0 (0 means the default %v), got %v", DefaultTimeout, c.Timeout)
	case c.MMTimeout < 0:
		return invalidConfig("mmTimeout must be > 0 (0 means the default %v), got %v", DefaultMMTimeout, c.MMTimeout)
	case c.AttemptTimeout != nil && *c.AttemptTimeout < 0:
		return invalidConfig("attemptTimeout must be >= 0 (0 means no per-attempt cap), got %v", *c.AttemptTimeout)
	case c.MaxResponseBytes < 0:
		return invalidConfig("maxResponseBytes must be > 0 (0 means the default %d), got %d", DefaultMaxResponseBytes, c.MaxResponseBytes)
	case c.MaxIdleConnsPerHost < 0:
		return invalidConfig("maxIdleConnsPerHost must be > 0 (0 means the default %d), got %d", DefaultMaxIdleConnsPerHost, c.MaxIdleConnsPerHost)
	case c.MaxConcurrency != nil && *c.MaxConcurrency < 0:
		return invalidConfig("maxConcurrency must be >= 0 (0 means no limit), got %d", *c.MaxConcurrency)
	case c.MaxQueueWait != nil && *c.MaxQueueWait < 0:
		return invalidConfig("maxQueueWait must be >= 0 (0 means no wait for a render slot), got %v", *c.MaxQueueWait)
	}
	return nil
}

// WithDefaults returns c with every field left at its zero value (or nil)
// set to its default, and URL without a trailing slash: the configuration a
// Client built from c runs with (Client.Config).
func (c Config) WithDefaults() Config {
	if c.OmitMMKwargs == nil {
		c.OmitMMKwargs = new(true)
	}
	if c.AttemptTimeout == nil {
		c.AttemptTimeout = new(DefaultAttemptTimeout)
	}
	if c.MaxConcurrency == nil {
		c.MaxConcurrency = new(DefaultMaxConcurrency)
	}
	if c.MaxQueueWait == nil {
		c.MaxQueueWait = new(DefaultMaxQueueWait)
	}
	if c.Hedge == nil {
		c.Hedge = new(true)
	}
	if c.MessagesRenderMode == "" {
		c.MessagesRenderMode = ModeAuto
	}
	if c.ResponsesRenderMode == "" {
		c.ResponsesRenderMode = ModeAuto
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MMTimeout == 0 {
		c.MMTimeout = DefaultMMTimeout
	}
	if c.MaxResponseBytes == 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.MaxIdleConnsPerHost == 0 {
		c.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
	}
	c.URL = strings.TrimRight(c.URL, "/")
	return c
}

// validateBaseURL accepts an absolute http or https URL with a host and no
// query or fragment.
func validateBaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q: scheme must be http or https", s)
	}
	if u.Host == "" {
		return fmt.Errorf("%q: missing host", s)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q: a base URL has no query or fragment", s)
	}
	return nil
}

// LoadConfig decodes a JSON object over DefaultConfig (keys that are absent
// keep their defaults), rejects unknown keys (naming their path), bare
// numbers as durations and trailing data, and validates the result.
func LoadConfig(r io.Reader) (Config, error) {
	return jsonconf.Load(r, DefaultConfig(), jsonconf.Under(ErrInvalidConfig), Config.Validate)
}

// configFields is Config without its methods, so that decoding it does not
// recurse into Config.UnmarshalJSON.
type configFields Config

// UnmarshalJSON decodes c strictly, wherever a Config is decoded: unknown
// keys are an error even when the surrounding decoder does not disallow
// them, and durations are Go duration strings. Keys not present keep their
// current value.
func (c *Config) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*configFields)(c))
}

// MarshalJSON encodes c with its durations as Go duration strings.
func (c Config) MarshalJSON() ([]byte, error) {
	return jsonconf.Marshal(configFields(c))
}
