package jsonconf

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
)

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// hasUnmarshaler reports whether *t decodes itself.
func hasUnmarshaler(t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(unmarshalerType) || t.Implements(unmarshalerType)
}

// checkText checks v, at a position of type t that reads itself from text
// (encoding.TextUnmarshaler: a name, such as a wire format's), as
// encoding/json would decode it: it must be a string, which t's
// UnmarshalText must take. The errors name path; a number, even one t's
// underlying integer could hold, is refused.
func checkText(v any, t reflect.Type, path string) error {
	s, ok := v.(string)
	if !ok {
		return kindError(path, v, "a string")
	}
	if err := reflect.New(t).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
		return &Error{Path: path, Msg: err.Error()}
	}
	return nil
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
	} else if t.Kind() != reflect.Struct && reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return v, checkText(v, t, path)
	}
	switch t.Kind() {
	case reflect.Struct:
		o, ok := v.(*object)
		if !ok {
			if hasUnmarshaler(t) {
				return v, ownForm(v, t, path)
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

// ownForm checks v, a value that is no object, at a position of struct type
// t that decodes itself: t's UnmarshalJSON must take it, as time.Time takes
// its string. A type that wants an object (every Config) is refused as a
// plain struct is, and any other refusal is given under path too, since
// encoding/json would hand back the method's error without the path, or
// naming the Go type the method decoded into.
func ownForm(v any, t reflect.Type, path string) error {
	raw, err := json.Marshal(v)
	if err == nil {
		err = reflect.New(t).Interface().(json.Unmarshaler).UnmarshalJSON(raw)
	}
	if err == nil {
		return nil
	}
	var ce *Error
	var te *json.UnmarshalTypeError
	if errors.As(err, &ce) && ce.Path == "" || errors.As(err, &te) {
		return kindError(path, v, "an object")
	}
	return &Error{Path: path, Msg: err.Error()}
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
