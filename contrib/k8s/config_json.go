package k8s

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Discovery's configuration is read by the same rules as every kvroute
// configuration (the core module's internal jsonconf loader, which a contrib
// module cannot import): a key must be exactly a field's JSON name, an
// unknown key is an error naming it, and a duration is a Go duration string
// ("250ms"; a bare number is an error, not nanoseconds). Config has one
// duration and no nested sections, so these few lines are the whole loader.

// LoadConfig decodes one JSON Config from r over the zero Config (absent
// keys mean the defaults New applies); anything after the value is an error.
func LoadConfig(r io.Reader) (Config, error) {
	dec := json.NewDecoder(r)
	var cfg Config
	if err := dec.Decode(&cfg); err != nil {
		return Config{}, fmt.Errorf("k8s: config: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Config{}, fmt.Errorf("k8s: config: trailing data after the configuration value")
	}
	return cfg, nil
}

// configFields is Config without its methods, so that decoding it does not
// recurse into Config.UnmarshalJSON.
type configFields Config

// UnmarshalJSON decodes c strictly wherever a Config is decoded (LoadConfig,
// a larger document, sigs.k8s.io/yaml). Keys not present keep their value.
func (c *Config) UnmarshalJSON(data []byte) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return err
	}
	names := jsonNames(reflect.TypeFor[Config]())
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if slices.Contains(names, k) {
			continue
		}
		for _, n := range names {
			if strings.EqualFold(n, k) {
				return fmt.Errorf("%s: unknown key (did you mean %q? keys are case-sensitive)", k, n)
			}
		}
		return fmt.Errorf("%s: unknown key", k)
	}
	var debounce *time.Duration
	if raw, ok := obj["debounce"]; ok {
		d, err := parseDuration(raw)
		if err != nil {
			return fmt.Errorf("debounce: %w", err)
		}
		debounce = d
		delete(obj, "debounce")
	}
	rest, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(rest))
	dec.DisallowUnknownFields()
	if err := dec.Decode((*configFields)(c)); err != nil {
		return err
	}
	if debounce != nil {
		c.Debounce = *debounce
	}
	return nil
}

// MarshalJSON encodes c with Debounce as a Go duration string, the form
// UnmarshalJSON reads.
func (c Config) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		configFields
		Debounce string `json:"debounce"`
	}{configFields(c), c.Debounce.String()})
}

// parseDuration reads a JSON duration string; null keeps the current value.
func parseDuration(raw json.RawMessage) (*time.Duration, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case nil:
		return nil, nil
	case string:
		d, err := time.ParseDuration(x)
		if err != nil {
			return nil, fmt.Errorf("invalid duration %q: a duration is a Go duration string such as \"2s\", \"250ms\" or \"1m30s\"", x)
		}
		return &d, nil
	case float64:
		return nil, fmt.Errorf("bare number %s is not a duration: write a Go duration string with its unit, such as \"2s\" or \"250ms\"", raw)
	}
	return nil, fmt.Errorf("want a duration string, got %s", raw)
}

// jsonNames lists the JSON keys of a struct type's fields.
func jsonNames(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "-" && f.IsExported() {
			if name == "" {
				name = f.Name
			}
			names = append(names, name)
		}
	}
	return names
}
