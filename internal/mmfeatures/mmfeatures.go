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
	// metadata, read only for their shape (each entry a string or null).
	KwargsData map[string][]Opaque `json:"kwargs_data"`
	MMMetadata map[string][]Opaque `json:"mm_metadata"`
}

// Placeholder is one item's span of placeholder tokens in token_ids,
// decoded by encoding/json through its UnmarshalJSON.
type Placeholder struct {
	Offset  *int     `json:"offset"`
	Length  *int     `json:"length"`
	IsEmbed *[]*bool `json:"is_embed"`
}

// Opaque is one entry of kwargs_data or mm_metadata: a string or null,
// checked for that and otherwise not kept (the strings are an item's
// serialized tensors, of no use to a router).
type Opaque struct{}

// UnmarshalJSON accepts a JSON string or null.
func (*Opaque) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && (b[0] == '"' || string(b) == "null") {
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
