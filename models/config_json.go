package models

import "github.com/kvroute/kvroute/internal/jsonconf"

// configFields is Config without its methods, so that decoding it does not
// recurse into Config.UnmarshalJSON.
type configFields Config

// UnmarshalJSON decodes c with kvroute's configuration rules (unknown keys
// rejected, duration strings).
func (c *Config) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*configFields)(c))
}

// MarshalJSON encodes c with durations as duration strings.
func (c Config) MarshalJSON() ([]byte, error) {
	return jsonconf.Marshal(configFields(c))
}

// pollConfigFields is PollConfig without its methods, so that decoding it
// does not recurse into PollConfig.UnmarshalJSON.
type pollConfigFields PollConfig

// UnmarshalJSON decodes c by the rules of every kvroute configuration,
// wherever a PollConfig is decoded, not only inside a Config: durations are
// Go duration strings ("30s"; a bare number is an error, not nanoseconds),
// and an unknown key, another case of a known one or a key given twice is
// an error naming its path. Keys not present, or null, keep their value;
// zero values mean the defaults.
func (c *PollConfig) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*pollConfigFields)(c))
}

// MarshalJSON encodes c with every duration as a Go duration string, the
// form UnmarshalJSON reads.
func (c PollConfig) MarshalJSON() ([]byte, error) {
	return jsonconf.Marshal(pollConfigFields(c))
}

// ruleFields and targetFields are Rule and Target without their methods,
// so that decoding them does not recurse into their UnmarshalJSON.
type (
	ruleFields   Rule
	targetFields Target
)

// UnmarshalJSON decodes r by the rules of every kvroute configuration
// wherever a Rule is decoded (alone, as a host's rewrite table, or inside a
// Config): an unknown key, another case of a known one ("Targets") or a
// key given twice is an error naming its path, instead of encoding/json's
// silent drop or case-insensitive match.
func (r *Rule) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*ruleFields)(r))
}

// MarshalJSON encodes r as UnmarshalJSON reads it.
func (r Rule) MarshalJSON() ([]byte, error) { return jsonconf.Marshal(ruleFields(r)) }

// UnmarshalJSON decodes t by the same rules as Rule's: a misspelt
// "wieght" is an error, not a target of the default weight.
func (t *Target) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*targetFields)(t))
}

// MarshalJSON encodes t as UnmarshalJSON reads it.
func (t Target) MarshalJSON() ([]byte, error) { return jsonconf.Marshal(targetFields(t)) }
