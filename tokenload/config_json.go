package tokenload

import (
	"io"

	"github.com/kvroute/kvroute/internal/jsonconf"
)

// LoadRequestTableConfig decodes a JSON RequestTableConfig over the zero
// value (absent keys mean the defaults NewRequestTable applies): unknown
// keys are an error naming their path and the TTL is a Go duration string
// ("30m"; a bare number is an error); the result is validated.
func LoadRequestTableConfig(r io.Reader) (RequestTableConfig, error) {
	return jsonconf.Load(r, RequestTableConfig{}, jsonconf.Prefixed("tokenload: config"), RequestTableConfig.validate)
}

// requestTableFields is RequestTableConfig without its methods, so that
// decoding it does not recurse into RequestTableConfig.UnmarshalJSON.
type requestTableFields RequestTableConfig

// UnmarshalJSON decodes c strictly wherever a RequestTableConfig is decoded
// (alone, or as the requests section of a Router's configuration): unknown
// keys are an error naming their path and the TTL is a Go duration string (a
// bare number is an error). Keys not present keep their current value.
func (c *RequestTableConfig) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*requestTableFields)(c))
}

// MarshalJSON encodes c with its TTL as a Go duration string, the form
// UnmarshalJSON reads.
func (c RequestTableConfig) MarshalJSON() ([]byte, error) {
	return jsonconf.Marshal(requestTableFields(c))
}
