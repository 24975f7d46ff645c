package jsonconf

import (
	"reflect"
)

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
