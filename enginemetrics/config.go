package enginemetrics

import (
	"fmt"
	"io"
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/kvroute/kvroute/internal/jsonconf"
)

// Defaults of Config, applied where a setting is zero. The thresholds,
// interval and staleness are those of the Gateway API Inference Extension's
// saturation detector, so an operator moving from llm-d's router finds the
// same behaviour.
const (
	// DefaultInterval is how often each endpoint is scraped.
	DefaultInterval = 50 * time.Millisecond
	// DefaultStaleness is how old a signal may be and still count.
	DefaultStaleness = 200 * time.Millisecond
	// DefaultTimeout bounds one scrape: the request, the response and its
	// body.
	DefaultTimeout = 200 * time.Millisecond
	// DefaultPath is the metrics path appended to an endpoint's URL.
	DefaultPath = "/metrics"
	// DefaultMaxBodyBytes bounds one response body; a vLLM server's whole
	// /metrics, histograms included, is a few hundred kilobytes.
	DefaultMaxBodyBytes = 4 << 20
	// DefaultConcurrency bounds the scrapes in flight at once.
	DefaultConcurrency = 16
	// DefaultWaitingThreshold is the number of waiting requests at which an
	// engine counts as saturated.
	DefaultWaitingThreshold = 5
	// DefaultKVCacheThreshold is the KV-cache usage (0 to 1) at which an
	// engine counts as saturated.
	DefaultKVCacheThreshold = 0.8
)

// Config configures a Scraper. The zero value means the defaults above; in
// JSON the durations are Go duration strings ("50ms") and unknown keys are
// errors.
type Config struct {
	// Interval between two scrapes of one endpoint (default "50ms"). A
	// scrape still in flight is not started again.
	Interval time.Duration `json:"interval"`
	// Staleness is how old the last successful scrape may be for the
	// endpoint's signal to count (default "200ms"); an older one is unknown,
	// never idle. It must be longer than Interval (with the defaults applied
	// to whichever is zero), or every signal would go stale before the next
	// scrape: a configuration that sets only the interval, to 200ms or more,
	// sets the staleness too.
	Staleness time.Duration `json:"staleness"`
	// Timeout bounds one scrape, body included (default "200ms").
	Timeout time.Duration `json:"timeout"`
	// Path is appended to the endpoint's URL (default "/metrics"); it
	// starts with "/" and is a valid URL path.
	Path string `json:"path"`
	// MaxBodyBytes bounds one response body (default 4 MiB); a larger one
	// fails the scrape as "too_large".
	MaxBodyBytes int64 `json:"maxBodyBytes"`
	// Concurrency bounds the scrapes in flight across all endpoints
	// (default 16).
	Concurrency int `json:"concurrency"`
	// WaitingThreshold: an engine with at least this many waiting requests
	// (vllm:num_requests_waiting) is saturated (default 5; negative ignores
	// the waiting queue).
	WaitingThreshold int `json:"waitingThreshold"`
	// KVCacheThreshold: an engine whose KV-cache usage
	// (vllm:kv_cache_usage_perc, 0 to 1) is at least this is saturated
	// (default 0.8; negative ignores KV-cache usage).
	KVCacheThreshold float64 `json:"kvCacheThreshold"`
}

// withDefaults fills zero fields and validates the result, naming the key
// of the first invalid setting.
func (c Config) withDefaults() (Config, error) {
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Staleness == 0 {
		c.Staleness = DefaultStaleness
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Path == "" {
		c.Path = DefaultPath
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.WaitingThreshold == 0 {
		c.WaitingThreshold = DefaultWaitingThreshold
	}
	if c.KVCacheThreshold == 0 {
		c.KVCacheThreshold = DefaultKVCacheThreshold
	}
	switch {
	case c.Interval < 0:
		return c, fmt.Errorf("enginemetrics: interval %v is negative", c.Interval)
	case c.Staleness < 0:
		return c, fmt.Errorf("enginemetrics: staleness %v is negative", c.Staleness)
	case c.Interval >= c.Staleness:
		// Each signal would be stale before the next scrape replaced it:
		// every engine would count as unknown for part of each interval,
		// or for all of it.
		return c, fmt.Errorf("enginemetrics: interval %v is not shorter than staleness %v: every signal would go stale before the next scrape; set staleness above the interval (the defaults are %v and %v)",
			c.Interval, c.Staleness, DefaultInterval, DefaultStaleness)
	case c.Timeout < 0:
		return c, fmt.Errorf("enginemetrics: timeout %v is negative", c.Timeout)
	case !strings.HasPrefix(c.Path, "/"):
		return c, fmt.Errorf("enginemetrics: path %q does not start with /", c.Path)
	case !urlPath(c.Path):
		return c, fmt.Errorf("enginemetrics: path %q is not a URL path (an invalid escape or a control character)", c.Path)
	case c.MaxBodyBytes < 0:
		return c, fmt.Errorf("enginemetrics: maxBodyBytes %d is negative", c.MaxBodyBytes)
	case c.Concurrency < 0:
		return c, fmt.Errorf("enginemetrics: concurrency %d is negative", c.Concurrency)
	case math.IsNaN(c.KVCacheThreshold) || c.KVCacheThreshold > 1:
		return c, fmt.Errorf("enginemetrics: kvCacheThreshold %v is not at most 1", c.KVCacheThreshold)
	}
	return c, nil
}

// Validate reports the first invalid setting of c, naming its key, as New
// would: a configuration that embeds Config (the gateway's engineMetrics
// section) refuses it where it is read, not first when the scraper starts.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// urlPath reports whether path can end an endpoint's URL: the scrape's
// request could not be built for any endpoint otherwise.
func urlPath(path string) bool {
	_, err := url.Parse("http://localhost" + path)
	return err == nil
}

// LoadConfig decodes a JSON Config over the zero value (absent keys mean the
// defaults): unknown keys are an error naming their path and durations are
// Go duration strings (a bare number is an error); the result is validated.
func LoadConfig(r io.Reader) (Config, error) {
	return jsonconf.Load(r, Config{}, jsonconf.Prefixed("enginemetrics: config"), Config.Validate)
}

// configFields is Config without its methods, so that decoding it does not
// recurse into UnmarshalJSON.
type configFields Config

// UnmarshalJSON decodes c strictly wherever it is decoded (alone, or as a
// section of a larger configuration): unknown keys are an error naming their
// path and durations are Go duration strings. Keys not present keep their
// current value.
func (c *Config) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*configFields)(c))
}

// MarshalJSON encodes c with its durations as Go duration strings, the form
// UnmarshalJSON reads.
func (c Config) MarshalJSON() ([]byte, error) { return jsonconf.Marshal(configFields(c)) }
