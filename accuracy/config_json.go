package accuracy

import "github.com/kvroute/kvroute/internal/jsonconf"

// configFields is Config without its methods, so that decoding it does not
// recurse into Config.UnmarshalJSON.
type configFields Config

// UnmarshalJSON decodes c strictly wherever a Config is decoded (alone or
// inside a router's configuration): unknown keys are an error naming their
// path and resyncInterval is a Go duration string ("1m"), a bare number
// being an error. Keys not present keep their current value, so decoding
// over the zero Config leaves them zero, which New reads as the defaults.
func (c *Config) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*configFields)(c))
}

// MarshalJSON encodes c with resyncInterval as a Go duration string, the
// form UnmarshalJSON reads.
func (c Config) MarshalJSON() ([]byte, error) {
	return jsonconf.Marshal(configFields(c))
}
