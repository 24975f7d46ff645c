package replay

import "github.com/kvroute/kvroute/internal/jsonconf"

// clientConfigFields is ClientConfig without its methods, so that decoding it does not
// recurse into ClientConfig.UnmarshalJSON.
type clientConfigFields ClientConfig

// UnmarshalJSON decodes c strictly wherever a ClientConfig is decoded: unknown keys
// are an error naming their path, durations are Go duration strings ("2s",
// "250ms") and a bare number for one is an error. Keys not present keep
// their current value.
func (c *ClientConfig) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*clientConfigFields)(c))
}

// MarshalJSON encodes c with its durations as Go duration strings, the form
// UnmarshalJSON reads.
func (c ClientConfig) MarshalJSON() ([]byte, error) {
	return jsonconf.Marshal(clientConfigFields(c))
}

// serverConfigFields is ServerConfig without its methods, so that decoding it does not
// recurse into ServerConfig.UnmarshalJSON.
type serverConfigFields ServerConfig

// UnmarshalJSON decodes c strictly wherever a ServerConfig is decoded: unknown keys
// are an error naming their path, durations are Go duration strings ("2s",
// "250ms") and a bare number for one is an error. Keys not present keep
// their current value.
func (c *ServerConfig) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*serverConfigFields)(c))
}

// MarshalJSON encodes c with its durations as Go duration strings, the form
// UnmarshalJSON reads.
func (c ServerConfig) MarshalJSON() ([]byte, error) {
	return jsonconf.Marshal(serverConfigFields(c))
}
