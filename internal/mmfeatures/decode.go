package mmfeatures

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kvroute/kvroute/internal/jsonscan"
)

// vLLM's pydantic models read an object's members by their exact names,
// the last of a repeated name winning (Python's json.loads keeps it) and
// unknown names ignored. encoding/json matches struct fields
// case-insensitively and merges a repeated object or map into the first
// one's value, so that "MM_Hashes", "Offset" or a second mm_hashes would
// give items vLLM never sees. Features and Placeholder therefore find
// their members with jsonscan.Members and decode each one alone; the maps
// and lists inside match vLLM already (encoding/json keys a map by the
// exact name and replaces a repeated key's value).

// featuresMembers are Features' members, in the order of its fields.
var featuresMembers = []string{"mm_hashes", "mm_placeholders", "kwargs_data", "mm_metadata", "requires_kv", "kv_handoff"}

// UnmarshalJSON reads a "features" object by vLLM's rules for member names
// (see above); null leaves f as it is, as encoding/json does.
func (f *Features) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var v [6][]byte
	if err := members(b, featuresMembers, v[:]); err != nil {
		return err
	}
	var nf Features
	var requiresKV *bool
	if err := decodeMembers(featuresMembers[:5], v[:5], &nf.MMHashes, &nf.MMPlaceholders, &nf.KwargsData, &nf.MMMetadata, &requiresKV); err != nil {
		return err
	}
	if v[4] != nil && requiresKV == nil {
		// A strict boolean with a default, not an optional one.
		return errors.New("requires_kv: null, not a boolean")
	}
	nf.RequiresKV = requiresKV != nil && *requiresKV
	var err error
	if nf.KVHandoff, err = decodeKVHandoff(v[5]); err != nil {
		return err
	}
	*f = nf
	return nil
}

// kvHandoffMembers are the members of vLLM's MultiModalKvInfo, the
// kv_handoff of features: the handed-over KV's format version, the model
// it was computed by and how its positions continue.
var kvHandoffMembers = []string{"version", "model_fingerprint", "position_state"}

// decodeKVHandoff reads kv_handoff (b, nil when absent) as vLLM's
// MultiModalKvInfo types it and reports whether it is given: null, or an
// object with version 1, a non-empty model_fingerprint and position_state
// "sequence", all three required.
func decodeKVHandoff(b []byte) (bool, error) {
	if b == nil || string(b) == "null" {
		return false, nil
	}
	var v [3][]byte
	if err := members(b, kvHandoffMembers, v[:]); err != nil {
		return false, fmt.Errorf("kv_handoff: %w", err)
	}
	if string(v[0]) != "1" {
		return false, errors.New("kv_handoff.version must be 1")
	}
	var fp, pos *string
	if v[1] == nil || json.Unmarshal(v[1], &fp) != nil || fp == nil || *fp == "" {
		return false, errors.New("kv_handoff.model_fingerprint must be a non-empty string")
	}
	if v[2] == nil || json.Unmarshal(v[2], &pos) != nil || pos == nil || *pos != "sequence" {
		return false, errors.New(`kv_handoff.position_state must be "sequence"`)
	}
	return true, nil
}

// placeholderMembers are Placeholder's members, in the order of its
// fields.
var placeholderMembers = []string{"offset", "length", "is_embed"}

// UnmarshalJSON reads a placeholder object by vLLM's rules for member
// names (see above); null leaves p as it is, as encoding/json does.
func (p *Placeholder) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var v [3][]byte
	if err := members(b, placeholderMembers, v[:]); err != nil {
		return err
	}
	var np Placeholder
	if err := decodeMembers(placeholderMembers, v[:], &np.Offset, &np.Length, &np.IsEmbed); err != nil {
		return err
	}
	*p = np
	return nil
}

// members finds names in the object b (see jsonscan.Members). encoding/json
// validated b already, so the one error left to report is a value that is
// not an object.
func members(b []byte, names []string, vals [][]byte) error {
	if len(b) == 0 || b[0] != '{' {
		return errors.New("not a JSON object")
	}
	return jsonscan.Members(b, names, vals)
}

// decodeMembers decodes each value found, vals[i], into dsts[i]; an error
// names the member.
func decodeMembers(names []string, vals [][]byte, dsts ...any) error {
	for i, v := range vals {
		if v == nil {
			continue
		}
		if err := json.Unmarshal(v, dsts[i]); err != nil {
			return fmt.Errorf("%s: %w", names[i], err)
		}
	}
	return nil
}
