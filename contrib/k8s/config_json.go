package k8s

import (
	"io"

	"github.com/kvroute/kvroute/internal/jsonconf"
)

// Discovery's configuration is read by the same rules as every kvroute
// configuration (the core module's jsonconf loader): a key must be exactly a
// field's JSON name, an unknown key is an error naming it, and a duration is
// a Go duration string ("250ms"; a bare number is an error, not
// nanoseconds).

// LoadConfig decodes one JSON Config from r over the zero Config (absent
// keys mean the defaults New applies) and validates it (Config.Validate), so
// that a mistake New would refuse shows where the file is read; anything
// after the value is an error.
func LoadConfig(r io.Reader) (Config, error) {
	return jsonconf.Load(r, Config{}, jsonconf.Prefixed("k8s: config"), Config.Validate)
}

// configFields is Config without its methods, so that decoding it does not
// recurse into Config.UnmarshalJSON.
type configFields Config

// UnmarshalJSON decodes c strictly wherever a Config is decoded (LoadConfig,
// a larger document, sigs.k8s.io/yaml). Keys not present keep their value.
func (c *Config) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*configFields)(c))
}

// MarshalJSON encodes c with Debounce as a Go duration string, the form
// UnmarshalJSON reads.
func (c Config) MarshalJSON() ([]byte, error) {
	return jsonconf.Marshal(configFields(c))
}
