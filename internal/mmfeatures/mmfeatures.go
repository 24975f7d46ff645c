package mmfeatures

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Features is the "features" member of a GenerateRequest, decoded by
// encoding/json through its UnmarshalJSON. Every member vLLM requires or
// types strictly is a pointer or a map, so that a missing or null value is
// told apart from a present one; Items applies the rules.
type Features struct {
	MMHashes       map[string][]*string      `json:"mm_hashes"`
	MMPlaceholders map[string][]*Placeholder `json:"mm_placeholders"`
	// KwargsData and MMMetadata are the items' serialized tensors and
	// metadata, read only for their shape (each entry a string or null)
	// and for which items carry which (MetadataOnly).
	KwargsData map[string][]Opaque `json:"kwargs_data"`
	MMMetadata map[string][]Opaque `json:"mm_metadata"`
	// RequiresKV is requires_kv: the items come as decoder KV handed
	// over from another engine, not computed by the encoder (false when
	// absent).
	RequiresKV bool `json:"requires_kv"`
	// KVHandoff says that kv_handoff, the handed-over KV's compatibility
	// information, is given (and well formed: decodeKVHandoff).
	KVHandoff bool `json:"kv_handoff"`
}

// Placeholder is one item's span of placeholder tokens in token_ids,
// decoded by encoding/json through its UnmarshalJSON.
type Placeholder struct {
	Offset  *int     `json:"offset"`
	Length  *int     `json:"length"`
	IsEmbed *[]*bool `json:"is_embed"`
}

// Opaque is one entry of kwargs_data or mm_metadata: a string or null,
// checked for that; the string itself (an item's serialized tensors, of no
// use to a router) is not kept, only whether there is one.
type Opaque struct {
	// Set is true for a string, false for null.
	Set bool
}

// UnmarshalJSON accepts a JSON string or null.
func (o *Opaque) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && (b[0] == '"' || string(b) == "null") {
		o.Set = b[0] == '"'
		return nil
	}
	return errors.New("not a string or null")
}

// Item is one multimodal item of a prompt: its hash and the placeholder
// tokens it occupies.
type Item struct {
	Modality string
	Hash     string
	Offset   int
	Length   int
}

// Items checks f by vLLM's rules (see the package documentation) against a
// prompt of ntok tokens and returns its items sorted by offset, the order
// vLLM's engine keys blocks in; nil when there are none. An error says
// which rule the features break.
func (f *Features) Items(ntok int) ([]Item, error) {
	if f.MMHashes == nil {
		return nil, errors.New("features.mm_hashes is required (an object of hash lists by modality)")
	}
	if f.MMPlaceholders == nil {
		return nil, errors.New("features.mm_placeholders is required (an object of placeholder lists by modality)")
	}
	// Sorted modalities: the same body always gets the same error.
	mods := slices.Sorted(maps.Keys(f.MMHashes))
	n := 0
	for _, mod := range mods {
		hashes := f.MMHashes[mod]
		if hashes == nil {
			return nil, fmt.Errorf("features.mm_hashes[%q] is null, not a list", mod)
		}
		if i := slices.Index(hashes, nil); i >= 0 {
			return nil, fmt.Errorf("features.mm_hashes[%q][%d] is null, not a string", mod, i)
		}
		n += len(hashes)
	}
	for _, mod := range slices.Sorted(maps.Keys(f.MMPlaceholders)) {
		if err := checkPlaceholders(mod, f.MMPlaceholders[mod]); err != nil {
			return nil, err
		}
		if _, ok := f.MMHashes[mod]; !ok {
			return nil, fmt.Errorf("features: modality %q has placeholders but no hashes (mm_hashes and mm_placeholders must name the same modalities)", mod)
		}
	}
	for _, mod := range mods {
		places, ok := f.MMPlaceholders[mod]
		if !ok {
			return nil, fmt.Errorf("features: modality %q has hashes but no placeholders (mm_hashes and mm_placeholders must name the same modalities)", mod)
		}
		if h := len(f.MMHashes[mod]); h != len(places) {
			return nil, fmt.Errorf("features: modality %q has %d hashes but %d placeholders", mod, h, len(places))
		}
	}
	if err := checkParallel("kwargs_data", f.KwargsData, f.MMHashes, mods); err != nil {
		return nil, err
	}
	if err := checkParallel("mm_metadata", f.MMMetadata, f.MMHashes, mods); err != nil {
		return nil, err
	}
	if err := f.checkKV(); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	items := make([]Item, 0, n)
	for _, mod := range mods {
		for i, h := range f.MMHashes[mod] {
			p := f.MMPlaceholders[mod][i]
			items = append(items, Item{Modality: mod, Hash: *h, Offset: *p.Offset, Length: *p.Length})
		}
	}
	// Offsets are distinct once the overlap check below passes (lengths are
	// positive), so the order does not depend on how the body listed them.
	slices.SortFunc(items, func(a, b Item) int { return cmp.Compare(a.Offset, b.Offset) })
	for i := 1; i < len(items); i++ {
		// Offset+Length is not computed: lengths near the int range would
		// wrap it. Offsets are sorted, so prev.Offset <= it.Offset.
		prev, it := items[i-1], items[i]
		if it.Offset-prev.Offset < prev.Length {
			return nil, fmt.Errorf("features: placeholders overlap: %s at [%d, +%d) and %s at [%d, +%d)",
				prev.Modality, prev.Offset, prev.Length, it.Modality, it.Offset, it.Length)
		}
	}
	for _, it := range items {
		if it.Offset > ntok || it.Length > ntok-it.Offset {
			return nil, fmt.Errorf("features: %s placeholder [%d, +%d) does not end within the %d-token prompt", it.Modality, it.Offset, it.Length, ntok)
		}
	}
	return items, nil
}

// checkKV applies vLLM's rules to features whose items come as decoder KV
// (requires_kv true): they need kv_handoff, at least one hash, no empty
// hash list or hash, and no serialized tensors in kwargs_data (only
// nulls).
func (f *Features) checkKV() error {
	if !f.RequiresKV {
		return nil
	}
	if !f.KVHandoff {
		return errors.New("features: requires_kv requires kv_handoff compatibility information")
	}
	if len(f.MMHashes) == 0 {
		return errors.New("features: requires_kv requires nonempty multimodal hashes")
	}
	for _, hashes := range f.MMHashes {
		if len(hashes) == 0 || slices.ContainsFunc(hashes, func(h *string) bool { return *h == "" }) {
			return errors.New("features: requires_kv requires nonempty multimodal hashes")
		}
	}
	for _, kw := range f.KwargsData {
		if slices.ContainsFunc(kw, func(o Opaque) bool { return o.Set }) {
			return errors.New("features: requires_kv does not accept full kwargs_data")
		}
	}
	return nil
}

// ErrMetadataOnly is the refusal of a request whose features have an
// item given by its mm_metadata alone, without the encoder-cache
// transfer that would bring its embeddings (see CheckTransfer).
var ErrMetadataOnly = errors.New("metadata-only multimodal items require ec_transfer_params")

// CheckTransfer applies the rule vLLM's GenerateRequest adds to features
// that Items admitted: an item whose mm_metadata entry is a string while
// its kwargs_data entry is null (or kwargs_data is null) is metadata-only,
// its tensors left to arrive through the encoder-cache connector, and
// vLLM refuses it unless the request's ec_transfer_params is a non-empty
// object (ecTransfer), or requires_kv says the items come as decoder KV
// instead (a later vLLM's exception; a vLLM without requires_kv refuses
// such a request too, which the engine then answers, not the router).
// Routing a request that the engine refuses would index keys it never
// computes.
func (f *Features) CheckTransfer(ecTransfer bool) error {
	if ecTransfer || f.RequiresKV || !f.MetadataOnly() {
		return nil
	}
	return ErrMetadataOnly
}

// MetadataOnly reports whether an item of f has its mm_metadata but not
// its kwargs_data, as vLLM pairs them: the i-th entries of a modality's
// lists, a modality missing from kwargs_data (or kwargs_data null) having
// none.
func (f *Features) MetadataOnly() bool {
	for mod, meta := range f.MMMetadata {
		kw := f.KwargsData[mod]
		for i, m := range meta {
			if m.Set && (i >= len(kw) || !kw[i].Set) {
				return true
			}
		}
	}
	return false
}

// checkPlaceholders checks one modality's placeholder list.
func checkPlaceholders(mod string, places []*Placeholder) error {
	if places == nil {
		return fmt.Errorf("features.mm_placeholders[%q] is null, not a list", mod)
	}
	for i, p := range places {
		switch {
		case p == nil:
			return fmt.Errorf("features.mm_placeholders[%q][%d] is null, not an object", mod, i)
		case p.Offset == nil || p.Length == nil:
			return fmt.Errorf("features.mm_placeholders[%q][%d] needs an integer offset and length", mod, i)
		case *p.Offset < 0:
			return fmt.Errorf("features.mm_placeholders[%q][%d].offset is %d, must be >= 0", mod, i, *p.Offset)
		case *p.Length <= 0:
			return fmt.Errorf("features.mm_placeholders[%q][%d].length is %d, must be > 0", mod, i, *p.Length)
		case p.IsEmbed != nil && slices.Contains(*p.IsEmbed, nil):
			return fmt.Errorf("features.mm_placeholders[%q][%d].is_embed holds a null, not a boolean", mod, i)
		case p.IsEmbed != nil && len(*p.IsEmbed) != *p.Length:
			return fmt.Errorf("features.mm_placeholders[%q][%d].is_embed has %d entries for a length of %d", mod, i, len(*p.IsEmbed), *p.Length)
		}
	}
	return nil
}

// checkParallel checks kwargs_data or mm_metadata (name): when not null, it
// names the modalities of mm_hashes, each with a list as long.
func checkParallel(name string, lists map[string][]Opaque, hashes map[string][]*string, mods []string) error {
	if lists == nil {
		return nil
	}
	if len(lists) != len(hashes) {
		return fmt.Errorf("features.%s must name the same modalities as mm_hashes", name)
	}
	for _, mod := range mods {
		l, ok := lists[mod]
		switch {
		case !ok:
			return fmt.Errorf("features.%s must name the same modalities as mm_hashes (no %q)", name, mod)
		case l == nil:
			return fmt.Errorf("features.%s[%q] is null, not a list", name, mod)
		case len(l) != len(hashes[mod]):
			return fmt.Errorf("features.%s[%q] has %d entries for %d hashes", name, mod, len(l), len(hashes[mod]))
		}
	}
	return nil
}
