package accuracy

import (
	"fmt"
	"time"
)

// Config configures the closed loop that compares, per request, the cached
// tokens the index predicted on the chosen endpoint with the cached tokens
// the engine reports having reused (vLLM's
// usage.prompt_tokens_details.cached_tokens). The zero value is the
// defaults; durations are strings in JSON ("1m").
type Config struct {
	// Window is how many of an endpoint's latest observed requests decide
	// whether its misses persist. Default 20.
	Window int `json:"window"`
	// MissRatio is the share of the window's requests that missed
	// (|predicted − actual| > ToleranceTokens) above which the endpoint is
	// marked inaccurate, in [0, 1) (no share is above 1); it is marked
	// accurate again when the share falls to half of it. Default 0.5.
	MissRatio float64 `json:"missRatio"`
	// ToleranceTokens is the error, in tokens, still counted as a hit. vLLM
	// reuses whole blocks, so a converged index errs by 0; default 0.
	ToleranceTokens int `json:"toleranceTokens"`
	// Resync asks the event pool to replay an endpoint when it becomes
	// inaccurate (see kvevents.Pool.Resync). Default false.
	Resync bool `json:"resync"`
	// ResyncInterval is the least time between two resyncs of one endpoint,
	// a duration string such as "1m". An endpoint that becomes inaccurate
	// again sooner is resynced once the interval has passed, at its next
	// observed request, if it is still inaccurate then. Default 1 minute.
	ResyncInterval time.Duration `json:"resyncInterval"`
}

// Defaults of Config, applied where a field is zero.
const (
	// DefaultWindow is Config.Window's default.
	DefaultWindow = 20
	// DefaultMissRatio is Config.MissRatio's default.
	DefaultMissRatio = 0.5
	// DefaultResyncInterval is Config.ResyncInterval's default.
	DefaultResyncInterval = time.Minute
)

func (c Config) withDefaults() Config {
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.MissRatio == 0 {
		c.MissRatio = DefaultMissRatio
	}
	if c.ResyncInterval == 0 {
		c.ResyncInterval = DefaultResyncInterval
	}
	return c
}

// Validate reports the first invalid setting, naming it by its JSON path
// under a router's configuration (accuracy.window, ...).
func (c Config) Validate() error {
	switch {
	case c.Window < 0 || c.Window > 10_000:
		return fmt.Errorf("accuracy.window %d is outside [0, 10000]", c.Window)
	case !(c.MissRatio >= 0 && c.MissRatio < 1): // NaN too; no share is more than 1
		return fmt.Errorf("accuracy.missRatio %v is outside [0, 1)", c.MissRatio)
	case c.ToleranceTokens < 0:
		return fmt.Errorf("accuracy.toleranceTokens %d is negative", c.ToleranceTokens)
	case c.ResyncInterval < 0:
		return fmt.Errorf("accuracy.resyncInterval %v is negative", c.ResyncInterval)
	}
	return nil
}
