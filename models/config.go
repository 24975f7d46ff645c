package models

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Defaults of Config, declared once.
const (
	// DefaultLabel is the endpoint label (or Kubernetes annotation) whose
	// value lists an endpoint's served models, comma-separated.
	DefaultLabel = "kvroute.io/models"
	// DefaultPollInterval is how often the engines' /v1/models are read.
	DefaultPollInterval = 30 * time.Second
	// DefaultPollTimeout bounds one /v1/models call.
	DefaultPollTimeout = 2 * time.Second
	// DefaultMaxModels bounds the models kept per endpoint (a longer list
	// is cut and counted).
	DefaultMaxModels = 64
)

// Bounds on names from configuration, labels and the engines' answers.
const (
	// MaxNameBytes bounds a model name; longer names are refused
	// (configuration) or dropped and counted (labels, /v1/models).
	MaxNameBytes = 256
	// MaxCardFieldBytes bounds the owned_by and root an engine's
	// /v1/models card gives a model (root is a path: an adapter's
	// lora_path); a longer one is left out of the card and counted.
	MaxCardFieldBytes = 1024
	// maxPollBodyBytes bounds the /v1/models answer read from an engine.
	maxPollBodyBytes = 1 << 20
	// maxPollDuration bounds PollConfig.Interval and Timeout: ten years,
	// far past any useful setting, and small enough that the poller's
	// 2 × Interval (its connections' idle timeout) cannot overflow
	// time.Duration into a negative value.
	maxPollDuration = 10 * 365 * 24 * time.Hour
)

// Config is the models block of a gateway's configuration: where each
// endpoint's served models come from, and the rewrite table. The zero value
// is valid: endpoints serve the router's model only, nothing is polled,
// nothing is rewritten.
type Config struct {
	// Served lists the models of endpoints by ID ("ip:port"), for a static
	// fleet; it wins over Label and Poll for the endpoints it names. Each
	// entry names at least one model.
	Served map[string][]string `json:"served,omitempty"`
	// Label is the endpoint label whose value lists the endpoint's served
	// models, comma-separated (Kubernetes discovery reads the pod
	// annotation of that name: label values cannot hold "/"). Default
	// DefaultLabel.
	Label string `json:"label,omitempty"`
	// Poll reads each engine's /v1/models.
	Poll PollConfig `json:"poll"`
	// Adapters names LoRA adapters and their base models (adapter →
	// base), for adapters the engines' /v1/models does not report with a
	// parent: those only Served or Label names (a Kubernetes pod's models
	// annotation is its label). A request for one is routed as a LoRA
	// request of its base model (kvroute.Request.LoRA, for the lora
	// scorer), exactly as an adapter learnt from /v1/models is, and the
	// gateway's GET /v1/models lists it with its base as parent. It wins
	// over what the engines report. A base is a base model: no adapter of
	// this map, nor the adapter itself; a Served entry that lists an
	// adapter lists its base too (vLLM serves an adapter on top of its base
	// model). Names are checked as Served's are.
	Adapters map[string]string `json:"adapters,omitempty"`
	// Rewrites map a model name clients send to weighted target models
	// (aliases and canaries), as the Inference Extension's
	// InferenceModelRewrite does; see Table.
	Rewrites []Rule `json:"rewrites,omitempty"`
}

// PollConfig configures the /v1/models poller.
type PollConfig struct {
	// Enabled turns the poller on: the endpoints that neither Served nor
	// Label names get the models their /v1/models lists.
	Enabled bool `json:"enabled,omitempty"`
	// Interval between two polls of the fleet; default DefaultPollInterval.
	// At most 87600h (ten years), as Timeout.
	Interval time.Duration `json:"interval,omitempty"`
	// Timeout of one endpoint's call; default DefaultPollTimeout.
	Timeout time.Duration `json:"timeout,omitempty"`
	// MaxModels bounds the models kept per endpoint; default
	// DefaultMaxModels.
	MaxModels int `json:"maxModels,omitempty"`
}

// Rule maps one model name to its targets.
type Rule struct {
	// Model is the name clients send.
	Model string `json:"model"`
	// Targets are the models the request is sent as, one drawn per request
	// with probability weight/sum(weights).
	Targets []Target `json:"targets"`
}

// Target is one weighted target of a Rule.
type Target struct {
	// Model is the target model name, as the engines serve it.
	Model string `json:"model"`
	// Weight is the target's share, in [1, 1000000]; 0 (left out) counts
	// as 1, so targets without weights split evenly. A rule sets every
	// target's weight or none: a weight left out beside weights set is an
	// error, as in the Inference Extension's InferenceModelRewrite (a
	// target to send nothing to is left out of the rule).
	Weight int `json:"weight,omitempty"`
}

// validate reports PollConfig's first negative or overlong setting by its
// key.
func (c PollConfig) validate() error {
	switch {
	case c.Interval < 0:
		return fmt.Errorf("poll.interval %v is negative", c.Interval)
	case c.Interval > maxPollDuration:
		return fmt.Errorf("poll.interval %v is over %v", c.Interval, maxPollDuration)
	case c.Timeout < 0:
		return fmt.Errorf("poll.timeout %v is negative", c.Timeout)
	case c.Timeout > maxPollDuration:
		return fmt.Errorf("poll.timeout %v is over %v", c.Timeout, maxPollDuration)
	case c.MaxModels < 0:
		return fmt.Errorf("poll.maxModels %d is negative", c.MaxModels)
	}
	return nil
}

// withDefaults returns c with its zero fields set to the defaults.
func (c Config) withDefaults() Config {
	if c.Label == "" {
		c.Label = DefaultLabel
	}
	if c.Poll.Interval == 0 {
		c.Poll.Interval = DefaultPollInterval
	}
	if c.Poll.Timeout == 0 {
		c.Poll.Timeout = DefaultPollTimeout
	}
	if c.Poll.MaxModels == 0 {
		c.Poll.MaxModels = DefaultMaxModels
	}
	return c
}

// ErrInvalidConfig wraps every configuration error of the package.
var ErrInvalidConfig = errors.New("models: invalid configuration")

// Validate reports the first mistake of c.
func (c Config) Validate() error {
	for id, ms := range c.Served {
		if id == "" {
			return fmt.Errorf("%w: served: an empty endpoint ID", ErrInvalidConfig)
		}
		if len(ms) == 0 {
			return fmt.Errorf("%w: served[%s]: no models (leave the endpoint out to take its label, its /v1/models or the router's model)", ErrInvalidConfig, id)
		}
		for _, m := range ms {
			if err := checkName(m); err != nil {
				return fmt.Errorf("%w: served[%s]: %w", ErrInvalidConfig, id, err)
			}
		}
	}
	if err := c.validateAdapters(); err != nil {
		return err
	}
	if err := c.Poll.validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return validateRules(c.Rewrites)
}

// validateAdapters checks Adapters, in the order of its names: each name
// and base valid, a base no adapter (neither the adapter itself nor
// another adapter of the map: vLLM loads adapters on base models, so
// there is no chain and no cycle), and every Served entry listing an
// adapter listing its base.
func (c Config) validateAdapters() error {
	names := slices.Sorted(maps.Keys(c.Adapters))
	for _, a := range names {
		base := c.Adapters[a]
		if err := checkName(a); err != nil {
			return fmt.Errorf("%w: adapters: %w", ErrInvalidConfig, err)
		}
		if err := checkName(base); err != nil {
			return fmt.Errorf("%w: adapters[%s]: %w", ErrInvalidConfig, a, err)
		}
		if base == a {
			return fmt.Errorf("%w: adapters[%s]: an adapter is not its own base model", ErrInvalidConfig, a)
		}
		if _, ok := c.Adapters[base]; ok {
			return fmt.Errorf("%w: adapters[%s]: its base %q is itself an adapter (an adapter's base is a base model)", ErrInvalidConfig, a, base)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(c.Served)) {
		ms := c.Served[id]
		for _, m := range ms {
			if base, ok := c.Adapters[m]; ok && !slices.Contains(ms, base) {
				return fmt.Errorf("%w: served[%s] lists the adapter %q without its base model %q (vLLM serves an adapter on its base)",
					ErrInvalidConfig, id, m, base)
			}
		}
	}
	return nil
}

// validateRules checks a rewrite table: names valid, each model once,
// weights non-negative, at least one target, and a rule's weights set on
// every target or none (as the Inference Extension's InferenceModelRewrite
// requires).
func validateRules(rules []Rule) error {
	seen := map[string]bool{}
	for i, r := range rules {
		if err := checkName(r.Model); err != nil {
			return fmt.Errorf("%w: rewrites[%d].model: %w", ErrInvalidConfig, i, err)
		}
		if seen[r.Model] {
			return fmt.Errorf("%w: rewrites: model %q given twice", ErrInvalidConfig, r.Model)
		}
		seen[r.Model] = true
		if len(r.Targets) == 0 {
			return fmt.Errorf("%w: rewrites[%d] (%s): no targets", ErrInvalidConfig, i, r.Model)
		}
		weighted := 0
		for j, t := range r.Targets {
			if err := checkName(t.Model); err != nil {
				return fmt.Errorf("%w: rewrites[%d].targets[%d].model: %w", ErrInvalidConfig, i, j, err)
			}
			if t.Weight < 0 || t.Weight > 1_000_000 {
				return fmt.Errorf("%w: rewrites[%d].targets[%d].weight %d not in [0, 1000000]", ErrInvalidConfig, i, j, t.Weight)
			}
			if t.Weight > 0 {
				weighted++
			}
		}
		if weighted > 0 && weighted < len(r.Targets) {
			return fmt.Errorf("%w: rewrites[%d] (%s): some targets have a weight and some not: set every target's weight or none "+
				"(a target to send nothing to is left out)", ErrInvalidConfig, i, r.Model)
		}
	}
	return nil
}

// checkName rejects an empty, overlong or non-printable model name (not
// valid UTF-8, or holding a rune unicode.IsPrint refuses: a control,
// format or non-ASCII space character) and one holding a comma, the
// lists' separator.
func checkName(m string) error {
	switch {
	case m == "":
		return errors.New("empty model name")
	case len(m) > MaxNameBytes:
		return fmt.Errorf("model name of %d bytes (at most %d)", len(m), MaxNameBytes)
	case !utf8.ValidString(m):
		return fmt.Errorf("model name %q is not valid UTF-8", m)
	case !printable(m) || strings.ContainsRune(m, ','):
		return fmt.Errorf("model name %q holds a non-printable character or a comma", m)
	}
	return nil
}

// printable reports whether s is valid UTF-8 of runes unicode.IsPrint
// accepts.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
