package cluster

import (
	"io"

	"github.com/kvroute/kvroute/internal/jsonconf"
)

// LoadConfig decodes a JSON Config over the zero Config (absent keys mean
// the defaults New applies): unknown keys are an error naming their path and
// durations are Go duration strings ("250ms"; a bare number is an error);
// the result, with its defaults, is validated.
func LoadConfig(r io.Reader) (Config, error) {
	return jsonconf.Load(r, Config{}, jsonconf.Under(ErrInvalidConfig), func(c Config) error {
		return c.Validate()
	})
}

// configFields is Config without its methods, so that decoding it does not
// recurse into Config.UnmarshalJSON.
type configFields Config

// UnmarshalJSON decodes c strictly wherever a Config is decoded (alone, or
// as the cluster section of a Router's configuration): unknown keys are an
// error naming their path, durations are Go duration strings and a bare
// number for one is an error. Keys not present keep their current value.
func (c *Config) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*configFields)(c))
}

// MarshalJSON encodes c with its durations as Go duration strings, the form
// UnmarshalJSON reads.
func (c Config) MarshalJSON() ([]byte, error) {
	return jsonconf.Marshal(configFields(c))
}
