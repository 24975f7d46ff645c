package jsonconf

import (
	"reflect"
	"strings"
	"sync"
)

// structFields maps a struct type's JSON keys to the types of their fields,
// with the fields of embedded structs promoted as encoding/json does.
type structFields struct {
	byName map[string]reflect.Type
	names  []string
	// emptyUnset holds the keys of fields tagged `jsonconf:"emptyunset"`,
	// whose empty string reads as null.
	emptyUnset map[string]bool
}

// emptyUnsetTag is the jsonconf struct tag value that makes an empty string
// read as null (the field keeps its value, so its default applies), for
// formats such as llm-d's whose duration parameters are strings where ""
// means the default.
const emptyUnsetTag = "emptyunset"

var fieldCache sync.Map // reflect.Type -> *structFields

// fieldsOf lists t's JSON fields by encoding/json's rules: exported fields,
// named by their json tag (or Go name), "-" skipped, untagged embedded
// structs promoted, a shallower field hiding deeper ones of the same name and
// two at the same depth hiding each other.
func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	type cand struct {
		t      reflect.Type
		depth  int
		tagged bool
		empty  bool
	}
	found := map[string][]cand{}
	var order []string
	type level struct {
		t     reflect.Type
		depth int
	}
	queue := []level{{t, 0}}
	seen := map[reflect.Type]bool{}
	for len(queue) > 0 {
		l := queue[0]
		queue = queue[1:]
		if seen[l.t] {
			continue
		}
		seen[l.t] = true
		for i := 0; i < l.t.NumField(); i++ {
			sf := l.t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			ft := sf.Type
			if sf.Anonymous {
				et := ft
				if et.Kind() == reflect.Pointer {
					et = et.Elem()
				}
				if !sf.IsExported() && et.Kind() != reflect.Struct {
					continue
				}
				if name == "" && et.Kind() == reflect.Struct {
					queue = append(queue, level{et, l.depth + 1})
					continue
				}
			} else if !sf.IsExported() {
				continue
			}
			if name == "" {
				name = sf.Name
			}
			if _, ok := found[name]; !ok {
				order = append(order, name)
			}
			found[name] = append(found[name], cand{ft, l.depth, name != sf.Name || tag != "", sf.Tag.Get("jsonconf") == emptyUnsetTag})
		}
	}
	out := &structFields{byName: map[string]reflect.Type{}}
	for _, name := range order {
		cs := found[name]
		best := cs[0].depth
		for _, c := range cs {
			best = min(best, c.depth)
		}
		var at []cand
		for _, c := range cs {
			if c.depth == best {
				at = append(at, c)
			}
		}
		if len(at) > 1 {
			var tagged []cand
			for _, c := range at {
				if c.tagged {
					tagged = append(tagged, c)
				}
			}
			if len(tagged) != 1 {
				continue // ambiguous: encoding/json ignores the name
			}
			at = tagged
		}
		out.byName[name] = at[0].t
		if at[0].empty {
			if out.emptyUnset == nil {
				out.emptyUnset = map[string]bool{}
			}
			out.emptyUnset[name] = true
		}
		out.names = append(out.names, name)
	}
	f, _ := fieldCache.LoadOrStore(t, out)
	return f.(*structFields)
}
