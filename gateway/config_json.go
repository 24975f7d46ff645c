package gateway

import "github.com/kvroute/kvroute/internal/jsonconf"

// configFields is Config without its methods, so that decoding it does not
// recurse into Config.UnmarshalJSON.
type configFields Config

// UnmarshalJSON decodes c by the rules of every kvroute configuration,
// wherever a Config is decoded: durations are Go duration strings
// ("30s"; a bare number is an error, not nanoseconds), and an unknown key,
// another case of a known one or a key given twice is an error naming its
// path. Keys not present, or null, keep their value; zero values mean the
// defaults.
func (c *Config) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*configFields)(c))
}

// MarshalJSON encodes c with every duration as a Go duration string, the
// form UnmarshalJSON reads.
func (c Config) MarshalJSON() ([]byte, error) {
	return jsonconf.Marshal(configFields(c))
}

// disaggHostConfigFields is DisaggHostConfig without its methods, so that
// decoding it does not recurse into DisaggHostConfig.UnmarshalJSON.
type disaggHostConfigFields DisaggHostConfig

// UnmarshalJSON decodes c by the rules of every kvroute configuration,
// wherever a DisaggHostConfig is decoded, not only inside the gateway's
// configuration file: durations are Go duration strings ("2s"; a bare
// number is an error, not nanoseconds), and an unknown key, another case of
// a known one or a key given twice is an error naming its path
// ("exchange.prefillTimeout"). Keys not present, or null, keep their value;
// zero values mean the defaults.
func (c *DisaggHostConfig) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*disaggHostConfigFields)(c))
}

// MarshalJSON encodes c with every duration as a Go duration string, the
// form UnmarshalJSON reads.
func (c DisaggHostConfig) MarshalJSON() ([]byte, error) {
	return jsonconf.Marshal(disaggHostConfigFields(c))
}
