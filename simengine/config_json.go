package simengine

import "github.com/kvroute/kvroute/internal/jsonconf"

// configFields is Config without its methods, so that decoding it does not
// recurse into Config.UnmarshalJSON.
type configFields Config

// UnmarshalJSON decodes c by the rules of every kvroute configuration,
// wherever a Config is decoded: durations are Go duration strings
// ("10ms"; a bare number is an error, not nanoseconds), and an unknown key,
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

// hybridConfigFields is HybridConfig without its methods, so that decoding
// it does not recurse into HybridConfig.UnmarshalJSON.
type hybridConfigFields HybridConfig

// UnmarshalJSON decodes h by the rules of every kvroute configuration,
// wherever a HybridConfig is decoded, not only inside a Config: an unknown
// key, another case of a known one or a key given twice is an error naming
// its path, and a value of the wrong kind is an error. Keys not present, or
// null, keep their value; zero values mean the defaults.
func (h *HybridConfig) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*hybridConfigFields)(h))
}

// MarshalJSON encodes h in the form UnmarshalJSON reads.
func (h HybridConfig) MarshalJSON() ([]byte, error) {
	return jsonconf.Marshal(hybridConfigFields(h))
}

// loraConfigFields is LoRAConfig without its methods, so that decoding it
// does not recurse into LoRAConfig.UnmarshalJSON.
type loraConfigFields LoRAConfig

// UnmarshalJSON decodes c by the rules of every kvroute configuration,
// wherever a LoRAConfig is decoded, not only inside a Config: durations are
// Go duration strings ("50ms"; a bare number is an error, not
// nanoseconds), and an unknown key, another case of a known one or a key
// given twice is an error naming its path. Keys not present, or null, keep
// their value; zero values mean the defaults.
func (c *LoRAConfig) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*loraConfigFields)(c))
}

// MarshalJSON encodes c with every duration as a Go duration string, the
// form UnmarshalJSON reads.
func (c LoRAConfig) MarshalJSON() ([]byte, error) {
	return jsonconf.Marshal(loraConfigFields(c))
}
