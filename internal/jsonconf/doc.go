// Package jsonconf is kvroute's one configuration decoder: every package's
// LoadConfig and every Config's UnmarshalJSON and MarshalJSON go through it,
// so that all of kvroute's configuration reads the same way.
//
// The rules, at every depth (nested structs, embedded structs, maps, slices):
//
//   - A key must be exactly a field's JSON name (encoding/json would also
//     accept other cases); an unknown key is an error naming its path, such
//     as `speculative.ttlx`. A key given twice in one object is an error.
//   - A time.Duration field is a Go duration string ("2s", "250ms", "1m30s").
//     A bare number is an error that says so: the packages used to disagree on
//     the unit of a number (nanoseconds in some, milliseconds in others).
//   - A value of the wrong JSON kind (a string for a number, an object for a
//     list) is an error naming its path.
//   - A field of a non-struct type that reads itself from text
//     (encoding.TextUnmarshaler, without its own UnmarshalJSON) is a string
//     its UnmarshalText takes — a name, such as a wire format's — and its
//     refusal is an error naming the path; a number is an error even where
//     the type is an integer underneath, so a setting is named, not
//     numbered.
//   - Keys missing from the input, or given as null, keep the value the target
//     had (a pointer field too, where encoding/json would set nil), so
//     decoding over a DefaultConfig() yields the defaults for them; decoding
//     over the zero value leaves them zero, which every Config's New reads as
//     its defaults.
//   - A field tagged `jsonconf:"emptyunset"` reads an empty string as null:
//     it is for formats kvroute reads from other systems, such as llm-d's
//     duration parameters, which are strings where "" means the default.
//     Everywhere else "" is an invalid duration.
//   - Marshal writes durations back as duration strings, so what Marshal
//     writes Unmarshal reads.
//
// Config fields stay plain time.Duration, so Go callers write 2*time.Second.
// The decoder walks the parsed JSON alongside the Go type, checks it, turns
// duration strings into nanosecond numbers and then lets encoding/json (with
// unknown fields disallowed) assign the values. Subtrees whose Go type has its
// own UnmarshalJSON (the other config types) are checked with full paths but
// converted by that method, which itself uses this package.
package jsonconf
