package snapshot

import (
	"encoding/json"
	"fmt"

	"github.com/kvroute/kvroute/internal/jsonconf"
)

// clientConfigFields is ClientConfig without its methods, so that decoding
// it does not recurse into ClientConfig.UnmarshalJSON.
type clientConfigFields ClientConfig

// UnmarshalJSON decodes c by the rules of every kvroute configuration,
// wherever a ClientConfig is decoded, not only inside a kvevents
// PoolConfig: durations are Go duration strings ("30s"; a bare number is an
// error, not nanoseconds), and an unknown key, another case of a known one
// or a key given twice is an error naming its path. Keys not present, or
// null, keep their value (Limiter and OnAttemptError are never read);
// zero values mean the defaults.
func (c *ClientConfig) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*clientConfigFields)(c))
}

// MarshalJSON encodes c with every duration as a Go duration string, the
// form UnmarshalJSON reads.
func (c ClientConfig) MarshalJSON() ([]byte, error) {
	return jsonconf.Marshal(clientConfigFields(c))
}

// serverConfigFields is ServerConfig without its methods, so that decoding
// it does not recurse into ServerConfig.UnmarshalJSON.
type serverConfigFields ServerConfig

// UnmarshalJSON decodes c by the rules of every kvroute configuration,
// wherever a ServerConfig is decoded: durations are Go duration strings
// ("30s"; a bare number is an error, not nanoseconds), and an unknown key,
// another case of a known one or a key given twice is an error naming its
// path. publisherID must have exactly PublisherIDSize elements
// (encoding/json would zero missing ones and drop extra ones). Keys not
// present, or null, keep their value; zero values mean the defaults.
func (c *ServerConfig) UnmarshalJSON(data []byte) error {
	next := *c
	if err := jsonconf.Unmarshal(data, (*serverConfigFields)(&next)); err != nil {
		return err
	}
	var id struct {
		PublisherID []json.RawMessage `json:"publisherID"`
	}
	if err := json.Unmarshal(data, &id); err != nil {
		return err
	}
	if id.PublisherID != nil && len(id.PublisherID) != PublisherIDSize {
		return &jsonconf.Error{Path: "publisherID",
			Msg: fmt.Sprintf("%d bytes, want %d", len(id.PublisherID), PublisherIDSize)}
	}
	*c = next
	return nil
}

// MarshalJSON encodes c with every duration as a Go duration string, the
// form UnmarshalJSON reads.
func (c ServerConfig) MarshalJSON() ([]byte, error) {
	return jsonconf.Marshal(serverConfigFields(c))
}
