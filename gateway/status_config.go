package gateway

import (
	"encoding"
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"
)

// redacted replaces a credential's value on the status page.
const redacted = "[redacted]"

// secretKey matches the configuration keys whose values are credentials:
// Redis's password, the snapshot bootstrap token, and anything named like a
// secret, key or credential. Counts of tokens (queueThresholdTokens) are not
// credentials: the name must end in "token", not "tokens".
var secretKey = regexp.MustCompile(`(?i)(password|passwd|secret|credential|apikey|api_key|token|bearer|authorization|auth)$|(?i)(password|secret|credential)`)

// configText renders v (a configuration struct) for the status page as one
// "path: value" line per setting, in declaration order, keys named by their
// JSON names, durations as duration strings, and every credential-like
// value (secretKey, and the password of a URL's userinfo) replaced by
// "[redacted]" when set; a boolean, a switch such as corsAllowCredentials,
// is shown whatever its name.
func configText(v any) string {
	var b strings.Builder
	writeConfig(&b, "", reflect.ValueOf(v))
	return b.String()
}

var (
	durationType      = reflect.TypeFor[time.Duration]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

func writeConfig(b *strings.Builder, path string, v reflect.Value) {
	if v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			line(b, path, "null")
			return
		}
		v = v.Elem()
	}
	leaf := path[strings.LastIndexByte(path, '.')+1:]
	// A switch is no credential, whatever its name (corsAllowCredentials).
	if leaf != "" && v.Kind() != reflect.Struct && v.Kind() != reflect.Bool && secretKey.MatchString(leaf) && !v.IsZero() {
		line(b, path, redacted)
		return
	}
	switch {
	case v.Type() == durationType:
		line(b, path, time.Duration(v.Int()).String())
		return
	case v.Type().Implements(textMarshalerType) && v.Kind() != reflect.Struct:
		t, err := v.Interface().(encoding.TextMarshaler).MarshalText()
		if err != nil {
			line(b, path, "error: "+err.Error())
			return
		}
		line(b, path, redactURL(string(t)))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			line(b, path, v.Interface().(time.Time).Format(time.RFC3339))
			return
		}
		writeFields(b, path, v, nil)
	case reflect.Map:
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
		if len(keys) == 0 {
			line(b, path, "{}")
		}
		for _, k := range keys {
			writeConfig(b, join(path, fmt.Sprint(k)), v.MapIndex(k))
		}
	case reflect.Slice, reflect.Array:
		if v.Len() == 0 {
			line(b, path, "[]")
		}
		for i := range v.Len() {
			writeConfig(b, fmt.Sprintf("%s[%d]", path, i), v.Index(i))
		}
	case reflect.String:
		line(b, path, fmt.Sprintf("%q", redactURL(v.String())))
	case reflect.Func, reflect.Chan, reflect.UnsafePointer:
		// not configuration
	default:
		line(b, path, fmt.Sprint(v.Interface()))
	}
}

// writeFields writes the fields of struct v under path, those of its
// embedded structs inline, as encoding/json does, but for the keys in
// hidden: an outer struct's own fields of those names hide them, as a
// shallower field hides a deeper one in encoding/json (and the outer one
// is the setting the configuration file sets and the component reads).
func writeFields(b *strings.Builder, path string, v reflect.Value, hidden map[string]bool) {
	type field struct {
		name, opts string
		inline     bool
		v          reflect.Value
	}
	var fields []field
	own := map[string]bool{}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			fields = append(fields, field{inline: true, v: v.Field(i)})
			continue
		}
		if name == "" {
			name = f.Name
		}
		own[name] = true
		fields = append(fields, field{name: name, opts: opts, v: v.Field(i)})
	}
	for _, f := range fields {
		switch {
		case f.inline:
			inner := maps.Clone(hidden)
			if inner == nil {
				inner = map[string]bool{}
			}
			maps.Copy(inner, own)
			writeFields(b, path, f.v, inner)
		case hidden[f.name]:
		case strings.Contains(f.opts, "omitempty") && f.v.IsZero():
		default:
			writeConfig(b, join(path, f.name), f.v)
		}
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func line(b *strings.Builder, path, value string) {
	b.WriteString(path)
	b.WriteString(": ")
	b.WriteString(value)
	b.WriteByte('\n')
}

// redactURL hides the password of a URL's userinfo (redis://user:pw@host,
// http://user:pw@host); anything else comes back unchanged.
func redactURL(s string) string {
	if !strings.Contains(s, "@") || !strings.Contains(s, "://") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil {
		// Unparsable: hide everything between the scheme and the last @.
		i, j := strings.Index(s, "://")+len("://"), strings.LastIndexByte(s, '@')
		if i < j {
			return s[:i] + redacted + s[j:]
		}
		return s
	}
	if u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
		return strings.Replace(u.String(), "xxxxx", redacted, 1)
	}
	return s
}
