package kvevents

import "github.com/kvroute/kvroute/internal/jsonconf"

// snapshotConfigFields is SnapshotConfig without its methods, so that
// decoding it does not recurse into SnapshotConfig.UnmarshalJSON.
type snapshotConfigFields SnapshotConfig

// UnmarshalJSON decodes c by the rules of every kvroute configuration,
// wherever a SnapshotConfig is decoded, not only inside a PoolConfig:
// durations are Go duration strings ("30s"; a bare number is an error, not
// nanoseconds), and an unknown key, another case of a known one or a key
// given twice is an error naming its path ("client.backoff"). Keys not
// present, or null, keep their value; zero values mean the defaults.
// encoding/json's encoding of a SnapshotConfig is already the form this
// reads: its durations are Client's, whose MarshalJSON writes them as
// duration strings.
func (c *SnapshotConfig) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*snapshotConfigFields)(c))
}

// applierConfigFields is ApplierConfig without its methods, so that
// decoding it does not recurse into ApplierConfig.UnmarshalJSON.
type applierConfigFields ApplierConfig

// UnmarshalJSON decodes c by the rules of every kvroute configuration,
// wherever an ApplierConfig is decoded: an unknown key, another case of a
// known one or a key given twice is an error naming its path, and a value
// of the wrong kind is an error. Keys not present, or null, keep their
// value; zero values mean the defaults. An ApplierConfig has no duration,
// so encoding/json's encoding of it is already the form this reads.
func (c *ApplierConfig) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*applierConfigFields)(c))
}
