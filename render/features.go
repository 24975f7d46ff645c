package render

import (
	"cmp"
	"fmt"
	"slices"
)

// mmList is one modality's entry of mm_hashes or mm_placeholders.
type mmList struct {
	modality string
	hashes   []string
	places   []span // start = offset, end = offset + length
}

// decodeFeatures reads features: null or an object with mm_hashes and
// mm_placeholders (other members skipped). A valid answer has no more
// placeholders than the prompt's ntok tokens (none is empty, none overlaps
// another, none ends past the prompt) and one hash per placeholder, so the
// placeholders are read first, at most ntok of them, and then at most as
// many hashes: a longer list is refused as it is read, before it allocates
// (a hash can be written in 3 bytes, a placeholder in no fewer than 23).
func decodeFeatures(s *scanner, ntok int) (hashes, places []mmList, err error) {
	if s.literal("null") {
		return nil, nil, nil
	}
	hashesAt, placesAt := -1, -1 // where the last of each value starts
	err = eachMember(s, "features", func(k []byte) error {
		switch string(k) {
		case "mm_hashes":
			hashesAt = s.i
		case "mm_placeholders":
			placesAt = s.i
		}
		return s.skipValue(0)
	})
	if err != nil {
		return nil, nil, err
	}
	if placesAt >= 0 {
		ps := scanner{b: s.b, i: placesAt}
		if places, err = decodeModalityMap(&ps, "mm_placeholders", ntok, "tokens of the prompt", decodePlaceholder); err != nil {
			return nil, nil, err
		}
	}
	if hashesAt >= 0 {
		n := 0
		for _, p := range places {
			n += len(p.places)
		}
		hs := scanner{b: s.b, i: hashesAt}
		if hashes, err = decodeModalityMap(&hs, "mm_hashes", n, "placeholders", decodeHash); err != nil {
			return nil, nil, err
		}
	}
	return hashes, places, nil
}

func decodeHash(s *scanner, l *mmList) error {
	h, err := s.str()
	if err != nil {
		return fmt.Errorf("mm_hashes[%q]: %w", l.modality, err)
	}
	l.hashes = append(l.hashes, h)
	return nil
}

func decodePlaceholder(s *scanner, l *mmList) error {
	off, length := -1, -1
	err := eachMember(s, "mm_placeholders", func(k []byte) error {
		switch string(k) {
		case "offset", "length":
			v, err := s.uint(maxOffset)
			if err != nil {
				return fmt.Errorf("mm_placeholders[%q].%s: %w", l.modality, k, err)
			}
			if string(k) == "offset" {
				off = int(v)
			} else {
				length = int(v)
			}
			return nil
		}
		return s.skipValue(0)
	})
	if err != nil {
		return err
	}
	if off < 0 || length < 0 {
		return fmt.Errorf("mm_placeholders[%q]: missing offset or length", l.modality)
	}
	l.places = append(l.places, span{off, off + length})
	return nil
}

// decodeModalityMap reads null or {modality: [item, ...]} of at most limit
// items in all (those of a repeated modality included; limitOf names what
// limit counts, for the error). A null list is malformed: vLLM's request
// model types each one as a list.
func decodeModalityMap(s *scanner, what string, limit int, limitOf string, item func(*scanner, *mmList) error) ([]mmList, error) {
	if s.literal("null") {
		return nil, nil
	}
	var out []mmList
	n := 0
	err := eachMember(s, what, func(k []byte) error {
		l := mmList{modality: string(k)}
		if !s.consume('[') {
			return s.errorf("%s[%q]: expected an array", what, k)
		}
		s.ws()
		if !s.consume(']') {
			for {
				s.ws()
				if n++; n > limit {
					return s.errorf("%s: more items than the %d %s", what, limit, limitOf)
				}
				if err := item(s, &l); err != nil {
					return err
				}
				s.ws()
				if s.consume(',') {
					continue
				}
				if s.consume(']') {
					break
				}
				return s.errorf("%s: expected ',' or ']'", what)
			}
		}
		// A repeated modality replaces the earlier one, as in Python.
		for i := range out {
			if out[i].modality == l.modality {
				out[i] = l
				return nil
			}
		}
		out = append(out, l)
		return nil
	})
	return out, err
}

// eachMember reads an object, calling fn for each key with the scanner at the
// value; fn must consume the value.
func eachMember(s *scanner, what string, fn func(k []byte) error) error {
	if !s.consume('{') {
		return s.errorf("%s: expected an object", what)
	}
	s.ws()
	if s.consume('}') {
		return nil
	}
	for {
		s.ws()
		k, err := s.rawKey()
		if err != nil {
			return err
		}
		s.ws()
		if !s.consume(':') {
			return s.errorf("expected ':'")
		}
		s.ws()
		if err := fn(k); err != nil {
			return err
		}
		s.ws()
		if s.consume(',') {
			continue
		}
		if s.consume('}') {
			return nil
		}
		return s.errorf("%s: expected ',' or '}'", what)
	}
}

// joinFeatures pairs each modality's placeholders with its hashes and checks
// the answer by the rules vLLM's request model holds features to (its
// MultiModalFeatures validation, which builds every render answer): the two
// objects name the same modalities, each with as many hashes as
// placeholders; no placeholder is empty, overlaps another or ends past the
// prompt. It returns the items sorted by offset, the order vLLM's engine
// keys blocks in (offsets are distinct once nothing overlaps). Anything else
// is a malformed answer: keys computed from it could not match the
// engine's.
func joinFeatures(hashes, places []mmList, ntok int) ([]MMFeature, error) {
	n := 0
	for _, p := range places {
		n += len(p.places)
	}
	for _, h := range hashes {
		if !slices.ContainsFunc(places, func(p mmList) bool { return p.modality == h.modality }) {
			return nil, fmt.Errorf("mm_hashes[%q] has no placeholders", h.modality)
		}
	}
	out := make([]MMFeature, 0, n)
	for _, p := range places {
		var hs []string
		found := false
		for _, h := range hashes {
			if h.modality == p.modality {
				hs, found = h.hashes, true
			}
		}
		if !found {
			return nil, fmt.Errorf("mm_placeholders[%q] has no hashes", p.modality)
		}
		if len(hs) != len(p.places) {
			return nil, fmt.Errorf("modality %q: %d placeholders but %d hashes", p.modality, len(p.places), len(hs))
		}
		for i, sp := range p.places {
			if sp.end > ntok {
				return nil, fmt.Errorf("modality %q item %d: placeholder [%d, %d) outside the %d-token prompt", p.modality, i, sp.start, sp.end, ntok)
			}
			if sp.end == sp.start {
				return nil, fmt.Errorf("modality %q item %d: empty placeholder at %d", p.modality, i, sp.start)
			}
			out = append(out, MMFeature{Modality: p.modality, Hash: hs[i], Offset: sp.start, Length: sp.end - sp.start})
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	slices.SortFunc(out, func(a, b MMFeature) int { return cmp.Compare(a.Offset, b.Offset) })
	for i := 1; i < len(out); i++ {
		if prev := out[i-1]; out[i].Offset < prev.Offset+prev.Length {
			return nil, fmt.Errorf("placeholders overlap: %s at [%d, %d) and %s at [%d, %d)",
				prev.Modality, prev.Offset, prev.Offset+prev.Length, out[i].Modality, out[i].Offset, out[i].Offset+out[i].Length)
		}
	}
	return out, nil
}
