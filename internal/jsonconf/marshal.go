package jsonconf

import (
	"encoding/json"
	"reflect"
	"time"
)

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
