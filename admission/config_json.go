package admission

import "github.com/kvroute/kvroute/internal/jsonconf"

// objectiveFields, saturationFields and headroomFields are the sections of
// Config without their methods, so that decoding them does not recurse into
// their UnmarshalJSON.
type (
	objectiveFields  Objective
	saturationFields Saturation
	headroomFields   Headroom
)

// UnmarshalJSON decodes o strictly wherever an Objective is decoded (alone,
// as in a list of objectives a host keeps, or inside a Config): unknown keys
// are an error naming their path and queueTimeout is a Go duration string,
// never a bare number of nanoseconds. Keys not present keep their value.
func (o *Objective) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*objectiveFields)(o))
}

// MarshalJSON encodes o with queueTimeout as a Go duration string, the form
// UnmarshalJSON reads.
func (o Objective) MarshalJSON() ([]byte, error) { return jsonconf.Marshal(objectiveFields(o)) }

// UnmarshalJSON decodes s strictly wherever a Saturation is decoded, as
// Objective's does: maxPrefillBacklog is a Go duration string.
func (s *Saturation) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*saturationFields)(s))
}

// MarshalJSON encodes s with maxPrefillBacklog as a Go duration string.
func (s Saturation) MarshalJSON() ([]byte, error) { return jsonconf.Marshal(saturationFields(s)) }

// UnmarshalJSON decodes h strictly wherever a Headroom is decoded: an
// unknown key is an error naming its path.
func (h *Headroom) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*headroomFields)(h))
}

// MarshalJSON encodes h as UnmarshalJSON reads it.
func (h Headroom) MarshalJSON() ([]byte, error) { return jsonconf.Marshal(headroomFields(h)) }
