package server

import "github.com/kvroute/kvroute/internal/jsonconf"

// configFields is Config without its methods, so that decoding it does not
// recurse into Config.UnmarshalJSON.
type configFields Config

// UnmarshalJSON decodes c by the rules of every kvroute configuration,
// wherever a Config is decoded: durations are Go duration strings
// ("1ms"; a bare number is an error, not nanoseconds), and an unknown key,
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

// pdConfigFields is PDConfig without its methods, so that decoding it does
// not recurse into PDConfig.UnmarshalJSON.
type pdConfigFields PDConfig

// UnmarshalJSON decodes c by the rules of every kvroute configuration,
// wherever a PDConfig is decoded, not only inside a Config: durations are
// Go duration strings ("10s"; a bare number is an error, not nanoseconds),
// and an unknown key, another case of a known one or a key given twice is
// an error naming its path. Keys not present, or null, keep their value;
// zero values mean the defaults.
func (c *PDConfig) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*pdConfigFields)(c))
}

// MarshalJSON encodes c with every duration as a Go duration string, the
// form UnmarshalJSON reads.
func (c PDConfig) MarshalJSON() ([]byte, error) {
	return jsonconf.Marshal(pdConfigFields(c))
}
