package jsonexact

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"sync"

	"github.com/kvroute/kvroute/internal/jsonscan"
)

// maxDepth is the nesting Unmarshal follows, encoding/json's own bound.
const maxDepth = 10000

// Unmarshal decodes data into v (a non-nil pointer) as json.Unmarshal
// does, but reading each object that decodes into a struct by exact member
// names: a member whose name is not exactly one of the struct's JSON field
// names is ignored, as an unknown member is, and of a repeated name only
// the last member is decoded. Objects that decode into a map keep every
// name, the last of a repeated one winning (as encoding/json and Python
// agree). Values decoded by a json.Unmarshaler, json.RawMessage included,
// and values of interface type are passed on as they came. v's structs must
// not embed structs. Malformed JSON is an error, as it is for
// json.Unmarshal; so is a value encoding/json cannot decode into v.
func Unmarshal(data []byte, v any) error {
	if t := reflect.TypeOf(v); t == nil || t.Kind() != reflect.Pointer {
		return json.Unmarshal(data, v) // its *json.InvalidUnmarshalError
	}
	s := jsonscan.Scanner{Buf: data}
	s.WS()
	out, err := filter(make([]byte, 0, len(data)), &s, reflect.TypeOf(v), 1)
	if err != nil {
		return err
	}
	s.WS()
	if s.Pos != len(data) {
		return s.Errorf("data after the JSON value")
	}
	return json.Unmarshal(out, v)
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// filter appends to dst the value at s.Pos as it should reach a value of
// type t, and moves s past it.
func filter(dst []byte, s *jsonscan.Scanner, t reflect.Type, depth int) ([]byte, error) {
	for t.Kind() == reflect.Pointer && !t.Implements(unmarshalerType) {
		t = t.Elem()
	}
	c := s.Peek()
	opaque := t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType)
	switch {
	case opaque || depth > maxDepth:
	case c == '{' && t.Kind() == reflect.Struct:
		return filterObject(dst, s, fieldsOf(t), nil, depth)
	case c == '{' && t.Kind() == reflect.Map:
		return filterObject(dst, s, nil, t.Elem(), depth)
	case c == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		return filterArray(dst, s, t.Elem(), depth)
	}
	// Anything else goes as it came: encoding/json decodes it or reports
	// the type mismatch.
	start := s.Pos
	if err := s.SkipValue(depth, maxDepth, math.MaxInt); err != nil {
		return nil, err
	}
	return append(dst, s.Buf[start:s.Pos]...), nil
}

// member is one member of an object: its decoded name and its value's span.
type member struct {
	name       string
	key        []byte // the name as written, quotes included
	start, end int
}

// filterObject appends the object at s.Pos: for a struct (fields not nil)
// only the members named exactly as a field, each value filtered for its
// field's type; for a map every member, each value filtered for elem. Of a
// repeated name only the last member is written.
func filterObject(dst []byte, s *jsonscan.Scanner, fields map[string]reflect.Type, elem reflect.Type, depth int) ([]byte, error) {
	var ms []member
	s.Pos++ // '{'
	s.WS()
	if !s.Consume('}') {
		for {
			s.WS()
			ks := s.Pos
			esc, err := s.SkipString()
			if err != nil {
				return nil, err
			}
			key := s.Buf[ks:s.Pos]
			name := string(key[1 : len(key)-1])
			if esc {
				if name, err = jsonscan.Unquote(key); err != nil {
					return nil, s.Errorf("invalid string escape")
				}
			}
			s.WS()
			if !s.Consume(':') {
				return nil, s.Errorf("expected ':'")
			}
			s.WS()
			vs := s.Pos
			if err := s.SkipValue(depth+1, maxDepth, math.MaxInt); err != nil {
				return nil, err
			}
			if fields == nil || fields[name] != nil {
				ms = append(ms, member{name: name, key: key, start: vs, end: s.Pos})
			}
			s.WS()
			if s.Consume(',') {
				continue
			}
			if s.Consume('}') {
				break
			}
			return nil, s.Errorf("expected ',' or '}'")
		}
	}
	end := s.Pos
	last := make(map[string]int, len(ms))
	for i, m := range ms {
		last[m.name] = i
	}
	dst = append(dst, '{')
	first := true
	for i, m := range ms {
		if last[m.name] != i {
			continue
		}
		t := elem
		if fields != nil {
			t = fields[m.name]
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, m.key...)
		dst = append(dst, ':')
		vs := jsonscan.Scanner{Buf: s.Buf[:m.end], Pos: m.start}
		var err error
		if dst, err = filter(dst, &vs, t, depth+1); err != nil {
			return nil, err
		}
	}
	s.Pos = end
	return append(dst, '}'), nil
}

// filterArray appends the array at s.Pos, each element filtered for elem.
func filterArray(dst []byte, s *jsonscan.Scanner, elem reflect.Type, depth int) ([]byte, error) {
	s.Pos++ // '['
	dst = append(dst, '[')
	s.WS()
	if s.Consume(']') {
		return append(dst, ']'), nil
	}
	for {
		s.WS()
		var err error
		if dst, err = filter(dst, s, elem, depth+1); err != nil {
			return nil, err
		}
		s.WS()
		if s.Consume(',') {
			dst = append(dst, ',')
			continue
		}
		if s.Consume(']') {
			return append(dst, ']'), nil
		}
		return nil, s.Errorf("expected ',' or ']'")
	}
}

// structFields caches fieldsOf.
var structFields sync.Map // reflect.Type → map[string]reflect.Type

// fieldsOf returns t's fields by JSON name (the tag's, or the Go name
// without one), exported fields only, those tagged "-" left out.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	if f, ok := structFields.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	fields := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
	structFields.Store(t, fields)
	return fields
}
