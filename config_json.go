package kvroute

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/kvroute/kvroute/internal/jsonconf"
	"github.com/kvroute/kvroute/kvevents"
)

// passedDown lists the settings the Router sets once, at the top level, and
// passes down to a sub-configuration: their keys under the sub-configuration
// are errors naming the top-level key, and the Go fields must be left zero.
var passedDown = []struct {
	sub, key, top string
	set           func(Config) bool
}{
	{"index", "blockSize", "blockSize", func(c Config) bool { return c.Index.BlockSize != 0 }},
	{"index", "speculativeTTL", "speculative.ttl", func(c Config) bool { return c.Index.SpeculativeTTL != 0 }},
	{"render", "modelName", "model", func(c Config) bool { return c.Render.ModelName != "" }},
	{"events", "model", "model", func(c Config) bool { return c.Events.PoolConfig.Model != "" }},
}

func passedDownMsg(top string) string {
	return fmt.Sprintf("set once, by the top-level %q, and passed down from there: move the value to %q", top, top)
}

// validateOwned reports a passed-down setting set in its sub-configuration,
// or a pool setting hidden by EventsConfig set on the embedded PoolConfig.
func (c Config) validateOwned() error {
	for _, p := range passedDown {
		if p.set(c) {
			return fmt.Errorf("%w: %s.%s is %s", ErrInvalidConfig, p.sub, p.key, passedDownMsg(p.top))
		}
	}
	if c.Events.PoolConfig.Replay || c.Events.PoolConfig.TopicFilter != "" {
		return fmt.Errorf("%w: events: set EventsConfig.Replay and EventsConfig.TopicFilter, which hide the embedded PoolConfig's fields of the same name (those are set from them)", ErrInvalidConfig)
	}
	return nil
}

// rejectPassedDown reports the first passed-down key present in data, a JSON
// object; malformed input is left for jsonconf to report.
func rejectPassedDown(data []byte) error {
	var subs map[string]json.RawMessage
	if json.Unmarshal(data, &subs) != nil {
		return nil
	}
	for _, p := range passedDown {
		var keys map[string]json.RawMessage
		if json.Unmarshal(subs[p.sub], &keys) != nil {
			continue
		}
		if _, ok := keys[p.key]; ok {
			return &jsonconf.Error{Path: p.sub + "." + p.key, Msg: passedDownMsg(p.top)}
		}
	}
	return nil
}

// configFields is Config without its methods, so that decoding it does not
// recurse into Config.UnmarshalJSON.
type configFields Config

// UnmarshalJSON decodes c strictly wherever a Config is decoded (LoadConfig,
// a larger JSON document, sigs.k8s.io/yaml): unknown keys are an error naming
// their path, so are the passed-down keys (index.blockSize,
// index.speculativeTTL, render.modelName, events.model), and durations are Go
// duration strings. Keys not present, or null, keep their current value.
func (c *Config) UnmarshalJSON(data []byte) error {
	if err := rejectPassedDown(data); err != nil {
		return err
	}
	return jsonconf.Unmarshal(data, (*configFields)(c))
}

// MarshalJSON encodes c with every duration as a Go duration string, the form
// LoadConfig reads, and without the passed-down keys.
func (c Config) MarshalJSON() ([]byte, error) {
	data, err := jsonconf.Marshal(configFields(c))
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	if m["index"], err = withoutKey(m["index"], "blockSize", "speculativeTTL"); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// eventsFields is EventsConfig without the JSON methods it would otherwise
// take from the embedded PoolConfig; it is what jsonconf checks.
type eventsFields struct {
	Enabled     *bool   `json:"enabled"`
	Selector    string  `json:"selector"`
	Replay      *bool   `json:"replay"`
	TopicFilter *string `json:"topicFilter"`
	kvevents.PoolConfig
}

// eventsOwn lists EventsConfig's own keys, those that are not the pool's.
var eventsOwn = []string{"enabled", "selector", "replay", "topicFilter"}

// UnmarshalJSON decodes e strictly, with the pool's keys inline: unknown keys
// are an error naming their path and durations are Go duration strings. Keys
// not present, or null, keep their current value. (Without it, the
// PoolConfig methods promoted by embedding would drop EventsConfig's own
// keys.)
func (e *EventsConfig) UnmarshalJSON(data []byte) error {
	if err := jsonconf.Check(data, reflect.TypeFor[eventsFields]()); err != nil {
		return err
	}
	var own struct {
		Enabled     *bool   `json:"enabled"`
		Selector    *string `json:"selector"`
		Replay      *bool   `json:"replay"`
		TopicFilter *string `json:"topicFilter"`
	}
	if err := json.Unmarshal(data, &own); err != nil {
		return err
	}
	rest, err := withoutKey(data, eventsOwn...)
	if err != nil {
		return err
	}
	if err := e.PoolConfig.UnmarshalJSON(rest); err != nil {
		return err
	}
	if own.Enabled != nil {
		e.Enabled = own.Enabled
	}
	if own.Selector != nil {
		e.Selector = *own.Selector
	}
	if own.Replay != nil {
		e.Replay = own.Replay
	}
	if own.TopicFilter != nil {
		e.TopicFilter = own.TopicFilter
	}
	return nil
}

// MarshalJSON encodes e with the pool's keys inline (but for model, which is
// the top-level model's) and durations as Go duration strings.
func (e EventsConfig) MarshalJSON() ([]byte, error) {
	pool, err := e.PoolConfig.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(pool, &m); err != nil {
		return nil, err
	}
	delete(m, "model")
	m["enabled"], _ = json.Marshal(e.Enabled)
	m["selector"], _ = json.Marshal(e.Selector)
	m["replay"], _ = json.Marshal(e.Replay)
	m["topicFilter"], _ = json.Marshal(e.TopicFilter)
	return json.Marshal(m)
}

// withoutKey returns the JSON object data without its keys ks.
func withoutKey(data []byte, ks ...string) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return data, nil
	}
	for _, k := range ks {
		delete(m, k)
	}
	return json.Marshal(m)
}

// speculativeFields, readinessFields and metricLabelsFields are the
// sub-configurations without their methods, so that decoding them does not
// recurse into their UnmarshalJSON.
type (
	speculativeFields  SpeculativeConfig
	readinessFields    ReadinessConfig
	metricLabelsFields MetricLabelsConfig
)

// UnmarshalJSON decodes c strictly wherever a SpeculativeConfig is decoded,
// not only inside a Config: unknown keys are an error naming their path and
// ttl is a Go duration string. Keys not present, or null, keep their value.
func (c *SpeculativeConfig) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*speculativeFields)(c))
}

// MarshalJSON encodes c with ttl as a Go duration string, the form
// UnmarshalJSON reads.
func (c SpeculativeConfig) MarshalJSON() ([]byte, error) {
	return jsonconf.Marshal(speculativeFields(c))
}

// UnmarshalJSON decodes c strictly wherever a ReadinessConfig is decoded,
// not only inside a Config: unknown keys are an error naming their path and
// giveUpAfter is a Go duration string. Keys not present, or null, keep
// their value.
func (c *ReadinessConfig) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*readinessFields)(c))
}

// MarshalJSON encodes c with giveUpAfter as a Go duration string, the form
// UnmarshalJSON reads.
func (c ReadinessConfig) MarshalJSON() ([]byte, error) {
	return jsonconf.Marshal(readinessFields(c))
}

// UnmarshalJSON decodes c strictly wherever a MetricLabelsConfig is
// decoded, not only inside a Config: unknown keys are an error naming their
// path. Keys not present, or null, keep their value. It has no duration, so
// encoding/json's encoding of it is already the form this reads.
func (c *MetricLabelsConfig) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*metricLabelsFields)(c))
}
