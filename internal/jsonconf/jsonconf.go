package jsonconf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Error is a configuration error at one key path ("" is the top level).
type Error struct {
	// Path is the dotted key path of the offending value, such as
	// "events.replayClient.timeout" or "index.tierWeights.gpu"; list
	// elements appear as "[3]".
	Path string
	// Msg says what is wrong with it.
	Msg string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

var durationType = reflect.TypeFor[time.Duration]()

// MaxBytes bounds the input Decode reads; configurations are small, and a
// larger input is an error rather than a memory spike.
const MaxBytes = 16 << 20

// Decode reads one JSON value from r into *v by the package rules; anything
// but white space after the value is an error. Load, every package's
// LoadConfig, decodes with it.
func Decode[T any](r io.Reader, v *T) error {
	data, err := io.ReadAll(io.LimitReader(r, MaxBytes+1))
	if err != nil {
		return err
	}
	if len(data) > MaxBytes {
		return &Error{Msg: fmt.Sprintf("configuration larger than %d bytes", MaxBytes)}
	}
	return Unmarshal(data, v)
}

// Load is every package's LoadConfig: it decodes one JSON value from r
// over start (the zero value, or DefaultConfig where absent keys keep the
// defaults) by the package rules, then checks the result with check (nil:
// none), so that a configuration read from a file is validated where it is
// read, not first where it is used. A decoding error is returned through
// wrap, which gives it the package's name or sentinel error; check's error
// is returned as it is, since each package's Validate already names itself.
func Load[T any](r io.Reader, start T, wrap func(error) error, check func(T) error) (T, error) {
	var zero T
	if err := Decode(r, &start); err != nil {
		return zero, wrap(err)
	}
	if check != nil {
		if err := check(start); err != nil {
			return zero, err
		}
	}
	return start, nil
}

// Under is Load's wrap for a package with a sentinel error: the decoding
// error follows the sentinel, and errors.Is finds both.
func Under(sentinel error) func(error) error {
	return func(err error) error { return fmt.Errorf("%w: %w", sentinel, err) }
}

// Prefixed is Load's wrap for a package without one: the decoding error
// after the prefix ("lora: config").
func Prefixed(prefix string) func(error) error {
	return func(err error) error { return fmt.Errorf("%s: %w", prefix, err) }
}

// Unmarshal decodes data into *v by the package rules. It is what every
// Config's UnmarshalJSON calls (with the Config converted to a method-less
// type of the same fields, so that it does not recurse), so that a Config
// decodes strictly wherever it is decoded: alone, inside a larger document,
// or through sigs.k8s.io/yaml.
func Unmarshal[T any](data []byte, v *T) error {
	if v == nil {
		return fmt.Errorf("jsonconf: Unmarshal needs a non-nil %T", v)
	}
	rv := reflect.ValueOf(v)
	tree, err := parse(data)
	if err != nil {
		return err
	}
	conv, err := walk(tree, rv.Type().Elem(), "", true)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(conv)
	if err != nil {
		return fmt.Errorf("jsonconf: re-encode: %w", err)
	}
	detach(rv.Elem())
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return &Error{Path: te.Field, Msg: fmt.Sprintf("cannot hold %s %s", te.Value, te.Type)}
		}
		return err
	}
	return nil
}

// detach gives every pointer-to-scalar and pointer-to-struct field of the
// struct v (at any depth of nested structs, pointed to or not) a pointee of
// its own, so that decoding into a copy of a Config (whose pointer settings
// and pointer sub-configs, nil meaning the default, share their pointees
// with the original) does not write through into the original:
// encoding/json decodes into the pointee of a non-nil pointer.
func detach(v reflect.Value) { detachDepth(v, 0) }

// maxDetachDepth bounds detach's descent: configurations nest a few levels,
// and a self-referencing type must not recurse without end.
const maxDetachDepth = 32

func detachDepth(v reflect.Value, depth int) {
	if v.Kind() != reflect.Struct || depth > maxDetachDepth {
		return
	}
	for i := range v.NumField() {
		f := v.Field(i)
		if !f.CanSet() || v.Type().Field(i).Tag.Get("json") == "-" {
			continue // not decoded: a runtime dependency (a shared limiter, say) keeps its identity
		}
		switch {
		case f.Kind() == reflect.Struct:
			detachDepth(f, depth+1)
		case f.Kind() == reflect.Pointer && !f.IsNil() && (isScalar(f.Type().Elem().Kind()) || f.Type().Elem().Kind() == reflect.Struct):
			c := reflect.New(f.Type().Elem())
			c.Elem().Set(f.Elem())
			f.Set(c)
			detachDepth(c.Elem(), depth+1)
		}
	}
}

func isScalar(k reflect.Kind) bool {
	switch k {
	case reflect.Bool, reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// Marshal encodes v as JSON with every time.Duration (at any depth) written
// as a Go duration string. Types with their own MarshalJSON are encoded by it.
func Marshal(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	tree, err := parse(raw)
	if err != nil {
		return nil, err
	}
	t := reflect.TypeOf(v)
	if t == nil {
		return raw, nil
	}
	return json.Marshal(stringify(tree, t))
}

// object is a parsed JSON object that keeps its key order.
type object struct {
	keys []string
	vals map[string]any
}

// MarshalJSON writes the object with its keys in their original order.
func (o *object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		vb, err := json.Marshal(o.vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// parse reads one JSON value into *object, []any, json.Number, string, bool
// or nil, rejecting duplicate keys and trailing data.
func parse(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec, "")
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &Error{Msg: "trailing data after the configuration value"}
	}
	return v, nil
}

func parseValue(dec *json.Decoder, path string) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, &Error{Path: path, Msg: "invalid JSON: " + err.Error()}
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &object{vals: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, &Error{Path: path, Msg: "invalid JSON: " + err.Error()}
				}
				k := kt.(string)
				kp := join(path, k)
				if _, dup := o.vals[k]; dup {
					return nil, &Error{Path: kp, Msg: "key given twice"}
				}
				v, err := parseValue(dec, kp)
				if err != nil {
					return nil, err
				}
				o.keys = append(o.keys, k)
				o.vals[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, &Error{Path: path, Msg: "invalid JSON: " + err.Error()}
			}
			return o, nil
		case '[':
			a := []any{}
			for dec.More() {
				v, err := parseValue(dec, fmt.Sprintf("%s[%d]", path, len(a)))
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, &Error{Path: path, Msg: "invalid JSON: " + err.Error()}
			}
			return a, nil
		}
		return nil, &Error{Path: path, Msg: fmt.Sprintf("invalid JSON: unexpected %v", t)}
	default:
		return tok, nil
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// hasUnmarshaler reports whether *t decodes itself.
func hasUnmarshaler(t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(unmarshalerType) || t.Implements(unmarshalerType)
}

// walk checks v against t and, when convert is set, returns v with duration
// strings replaced by nanosecond numbers. Below a type with its own
// UnmarshalJSON it only checks (that method converts).
func walk(v any, t reflect.Type, path string, convert bool) (any, error) {
	if v == nil {
		return nil, nil // null leaves the target as it was
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == durationType {
		switch x := v.(type) {
		case string:
			d, err := time.ParseDuration(x)
			if err != nil && durationSyntax(x) {
				return nil, &Error{Path: path, Msg: fmt.Sprintf("duration %q is out of range: at most %v (about 292 years)", x, time.Duration(math.MaxInt64))}
			}
			if err != nil {
				return nil, &Error{Path: path, Msg: fmt.Sprintf("invalid duration %q: a duration is a Go duration string such as \"2s\", \"250ms\" or \"1m30s\"", x)}
			}
			if !convert {
				return v, nil
			}
			return json.Number(strconv.FormatInt(int64(d), 10)), nil
		case json.Number:
			return nil, &Error{Path: path, Msg: fmt.Sprintf("bare number %s is not a duration: write a Go duration string with its unit, such as \"2s\" or \"250ms\"", x)}
		default:
			return nil, kindError(path, v, "a duration string")
		}
	}
	if convert && t.Kind() == reflect.Struct && hasUnmarshaler(t) {
		convert = false
	} else if t.Kind() != reflect.Struct && hasUnmarshaler(t) {
		return v, nil // a scalar type with its own format
	}
	switch t.Kind() {
	case reflect.Struct:
		o, ok := v.(*object)
		if !ok {
			if hasUnmarshaler(t) {
				return v, nil // a struct with its own non-object form (time.Time)
			}
			return nil, kindError(path, v, "an object")
		}
		fields := fieldsOf(t)
		keys := o.keys[:0]
		for _, k := range o.keys {
			f, ok := fields.byName[k]
			if !ok {
				return nil, &Error{Path: join(path, k), Msg: unknownMsg(k, fields)}
			}
			if s, ok := o.vals[k].(string); o.vals[k] == nil || ok && s == "" && fields.emptyUnset[k] {
				// null leaves the field as it was, pointers included
				// (encoding/json would set a pointer to nil); so does ""
				// in a field tagged emptyunset.
				delete(o.vals, k)
				continue
			}
			nv, err := walk(o.vals[k], f, join(path, k), convert)
			if err != nil {
				return nil, err
			}
			o.vals[k] = nv
			keys = append(keys, k)
		}
		o.keys = keys
		return o, nil
	case reflect.Map:
		o, ok := v.(*object)
		if !ok {
			return nil, kindError(path, v, "an object")
		}
		for _, k := range o.keys {
			nv, err := walk(o.vals[k], t.Elem(), join(path, k), convert)
			if err != nil {
				return nil, err
			}
			o.vals[k] = nv
		}
		return o, nil
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			if _, ok := v.(string); !ok {
				return nil, kindError(path, v, "a base64 string")
			}
			return v, nil
		}
		a, ok := v.([]any)
		if !ok {
			return nil, kindError(path, v, "a list")
		}
		for i := range a {
			nv, err := walk(a[i], t.Elem(), fmt.Sprintf("%s[%d]", path, i), convert)
			if err != nil {
				return nil, err
			}
			a[i] = nv
		}
		return a, nil
	case reflect.String:
		if _, ok := v.(string); !ok {
			return nil, kindError(path, v, "a string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return nil, kindError(path, v, "true or false")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		n, ok := v.(json.Number)
		if !ok {
			return nil, kindError(path, v, "a number")
		}
		if !fits(n, t) {
			return nil, &Error{Path: path, Msg: fmt.Sprintf("cannot hold number %s %s", n, t)}
		}
	}
	return v, nil
}

// durationSyntax reports whether s is written as time.ParseDuration reads
// a duration (an optional sign, then numbers each with a unit), so that a
// string of that form it refuses is one out of time.Duration's range, not
// a malformed one.
func durationSyntax(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for s != "" {
		i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
		if i <= 0 || s[:i] == "." || strings.Count(s[:i], ".") > 1 {
			return false
		}
		s = s[i:]
		unit := false
		for _, u := range []string{"ns", "us", "µs", "μs", "ms", "s", "m", "h"} {
			if rest, ok := strings.CutPrefix(s, u); ok {
				s, unit = rest, true
				break
			}
		}
		if !unit {
			return false
		}
	}
	return true
}

// fits reports whether n decodes into a value of the numeric type t as
// encoding/json decodes it: checked here, so that the error names the
// value's whole path even below a type with its own UnmarshalJSON, whose
// encoding/json error would name the path within that type only.
func fits(n json.Number, t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, err := strconv.ParseInt(string(n), 10, 64)
		return err == nil && !reflect.Zero(t).OverflowInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u, err := strconv.ParseUint(string(n), 10, 64)
		return err == nil && !reflect.Zero(t).OverflowUint(u)
	default:
		f, err := strconv.ParseFloat(string(n), t.Bits())
		return err == nil && !reflect.Zero(t).OverflowFloat(f)
	}
}

func kindError(path string, v any, want string) error {
	return &Error{Path: path, Msg: fmt.Sprintf("want %s, got %s", want, describe(v))}
}

func describe(v any) string {
	switch x := v.(type) {
	case *object:
		return "an object"
	case []any:
		return "a list"
	case string:
		return strconv.Quote(x)
	case json.Number:
		return "the number " + string(x)
	case bool:
		return strconv.FormatBool(x)
	}
	return fmt.Sprintf("%v", v)
}

func unknownMsg(k string, f *structFields) string {
	for _, name := range f.names {
		if strings.EqualFold(name, k) {
			return fmt.Sprintf("unknown key (did you mean %q? keys are case-sensitive)", name)
		}
	}
	return "unknown key"
}

// stringify returns v (parsed from json.Marshal of a value of type t) with
// the numbers at duration positions written as duration strings.
func stringify(v any, t reflect.Type) any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == durationType {
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				return time.Duration(i).String()
			}
		}
		return v
	}
	switch t.Kind() {
	case reflect.Struct:
		if o, ok := v.(*object); ok {
			fields := fieldsOf(t)
			for _, k := range o.keys {
				if f, ok := fields.byName[k]; ok {
					o.vals[k] = stringify(o.vals[k], f)
				}
			}
		}
	case reflect.Map:
		if o, ok := v.(*object); ok {
			for _, k := range o.keys {
				o.vals[k] = stringify(o.vals[k], t.Elem())
			}
		}
	case reflect.Slice, reflect.Array:
		if a, ok := v.([]any); ok {
			for i := range a {
				a[i] = stringify(a[i], t.Elem())
			}
		}
	}
	return v
}

// Check reports whether data would decode into a value of type t by the
// package rules, without decoding it. Types whose UnmarshalJSON splits its
// input between parts use it to check the whole first, so that errors name
// full paths.
func Check(data []byte, t reflect.Type) error {
	tree, err := parse(data)
	if err != nil {
		return err
	}
	_, err = walk(tree, t, "", false)
	return err
}
