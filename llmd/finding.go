package llmd

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// Kind says how kvroute stands to an llm-d setting it does not translate.
type Kind int

// The kinds of findings, from the most to the least consequential.
const (
	// NoEquivalent: kvroute has nothing that does what the setting does;
	// the behaviour it asks for is absent.
	NoEquivalent Kind = iota + 1
	// Different: kvroute reaches the same end another way, said in the
	// finding's note; the setting itself has no effect.
	Different
	// NotNeeded: the setting has no meaning for kvroute (it wires llm-d's
	// own parts together, or kvroute does it always), so ignoring it
	// changes nothing.
	NotNeeded
)

// String returns the kind as a finding prints it.
func (k Kind) String() string {
	switch k {
	case NoEquivalent:
		return "no equivalent"
	case Different:
		return "kvroute does this differently"
	case NotNeeded:
		return "ignored: not needed"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Finding is one llm-d setting of the document that kvroute does not carry
// over: where it is, how kvroute stands to it, and why.
type Finding struct {
	// Path is the key's dotted path in the document, with plugins and
	// scheduling profiles named by their name:
	// "plugins[precise-prefix-cache-producer].parameters.indexerConfig".
	Path string
	// Kind is how kvroute stands to the setting.
	Kind Kind
	// Note says what kvroute does instead, or why the setting is not
	// needed.
	Note string
}

// String formats f on one line: "path: kind (note)".
func (f Finding) String() string {
	if f.Note == "" {
		return f.Path + ": " + f.Kind.String()
	}
	return f.Path + ": " + f.Kind.String() + " (" + f.Note + ")"
}

// finding tags a parameters field that kvroute knows as llm-d's and does not
// translate: `finding:"different:what kvroute does instead"`. Such fields are
// json.RawMessage, so any value is accepted (llm-d checks it, not kvroute),
// and a present one becomes a Finding.
const findingTag = "finding"

var kindByTag = map[string]Kind{"none": NoEquivalent, "different": Different, "unneeded": NotNeeded}

// untranslated returns a Finding for every tagged field of v (a pointer to
// a parameters struct, or nil) that the document set, at any depth, in
// field order; path is v's own path.
func untranslated(v any, path string) []Finding {
	var out []Finding
	var walk func(rv reflect.Value, path string)
	walk = func(rv reflect.Value, path string) {
		for rv.Kind() == reflect.Pointer {
			if rv.IsNil() {
				return
			}
			rv = rv.Elem()
		}
		if rv.Kind() != reflect.Struct {
			return
		}
		t := rv.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			tag, ok := f.Tag.Lookup(findingTag)
			if !ok {
				walk(rv.Field(i), join(path, name))
				continue
			}
			raw, _ := rv.Field(i).Interface().(json.RawMessage)
			if !present(raw) {
				continue
			}
			kind, note, _ := strings.Cut(tag, ":")
			out = append(out, Finding{Path: join(path, name), Kind: kindByTag[kind], Note: note})
		}
	}
	walk(reflect.ValueOf(v), path)
	return out
}

// present reports whether a raw member was given a value (null is absent,
// as it is for llm-d's decoder).
func present(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

// join appends key to the dotted path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
