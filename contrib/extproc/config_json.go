package extproc

import "github.com/kvroute/kvroute/internal/jsonconf"

// configFields is Config without its methods, so that decoding it does not
// recurse into Config.UnmarshalJSON.
type configFields Config

// UnmarshalJSON decodes c by the rules of every kvroute configuration,
// wherever a Config is decoded (a host's own file, sigs.k8s.io/yaml): a key
// must be exactly a field's JSON name, and an unknown key, another case of
// a known one ("MaxBodyBytes") or a key given twice is an error naming it,
// instead of encoding/json's case-insensitive, last-wins match. Keys not
// present, or null, keep their value, and the zero value of each means its
// default.
func (c *Config) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*configFields)(c))
}

// MarshalJSON encodes c as UnmarshalJSON reads it.
func (c Config) MarshalJSON() ([]byte, error) {
	return jsonconf.Marshal(configFields(c))
}
