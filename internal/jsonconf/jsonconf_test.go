package jsonconf

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type inner struct {
	TTL   time.Duration            `json:"ttl"`
	Count int                      `json:"count"`
	Per   map[string]time.Duration `json:"per"`
	List  []time.Duration          `json:"list"`
}

type Embedded struct {
	Idle time.Duration `json:"idle"`
	Name string        `json:"name"`
}

type outer struct {
	Enabled bool `json:"enabled"`
	Embedded
	Inner  inner          `json:"inner"`
	Ptr    *inner         `json:"ptr"`
	Hidden time.Duration  `json:"-"`
	Self   selfDecoding   `json:"self"`
	Tags   []string       `json:"tags"`
	Weight float64        `json:"weight"`
	Any    map[string]any `json:"any"`
}

// selfDecoding has its own UnmarshalJSON through this package, as kvroute's
// config types do.
type selfDecoding struct {
	Wait time.Duration `json:"wait"`
	N    uint8         `json:"n,omitempty"`
	Seen bool          `json:"-"`
}

type selfPlain selfDecoding

func (s *selfDecoding) UnmarshalJSON(b []byte) error {
	s.Seen = true
	return Unmarshal(b, (*selfPlain)(s))
}

func (s selfDecoding) MarshalJSON() ([]byte, error) { return Marshal(selfPlain(s)) }

func TestDurationsAtEveryDepth(t *testing.T) {
	var o outer
	err := Unmarshal([]byte(`{"idle":"1m","inner":{"ttl":"2s","per":{"a":"250ms"},"list":["1h","1ns"]},
		"ptr":{"ttl":"3s"},"self":{"wait":"5s"}}`), &o)
	require.NoError(t, err)
	require.Equal(t, time.Minute, o.Idle)
	require.Equal(t, 2*time.Second, o.Inner.TTL)
	require.Equal(t, 250*time.Millisecond, o.Inner.Per["a"])
	require.Equal(t, []time.Duration{time.Hour, time.Nanosecond}, o.Inner.List)
	require.Equal(t, 3*time.Second, o.Ptr.TTL)
	require.Equal(t, 5*time.Second, o.Self.Wait)
	require.True(t, o.Self.Seen)
}

// A duration past time.Duration's range (about 292 years) is refused as
// out of range, naming its key, not wrapped to another value nor called
// malformed; a malformed one is still called invalid.
func TestDurationOutOfRangeNamesTheKey(t *testing.T) {
	type cfg struct {
		Inner struct {
			TTL time.Duration `json:"ttl"`
		} `json:"inner"`
	}
	for in, want := range map[string]string{
		`"2562047h47m16.854775807s"`: "",
		`"-2562047h"`:                "",
		`"2562048h"`:                 `inner.ttl: duration "2562048h" is out of range: at most 2562047h47m16.854775807s`,
		`"9223372037s"`:              `inner.ttl: duration "9223372037s" is out of range`,
		`"-9999999999h"`:             `inner.ttl: duration "-9999999999h" is out of range`,
		`"1e30s"`:                    `inner.ttl: invalid duration "1e30s"`,
		`"--5s"`:                     `inner.ttl: invalid duration "--5s"`,
		`"5"`:                        `inner.ttl: invalid duration "5"`,
		`".s"`:                       `inner.ttl: invalid duration ".s"`,
		`"1..5s"`:                    `inner.ttl: invalid duration "1..5s"`,
		`"99999999999999999999999d"`: `inner.ttl: invalid duration`,
	} {
		var c cfg
		err := Unmarshal([]byte(`{"inner":{"ttl":`+in+`}}`), &c)
		if want == "" {
			require.NoError(t, err, in)
			continue
		}
		require.ErrorContains(t, err, want, in)
	}
}

func TestBareNumberIsAnErrorNamingTheKey(t *testing.T) {
	for in, path := range map[string]string{
		`{"inner":{"ttl":2000}}`:            "inner.ttl",
		`{"idle":60}`:                       "idle",
		`{"inner":{"per":{"x":1}}}`:         "inner.per.x",
		`{"inner":{"list":["1s",5]}}`:       "inner.list[1]",
		`{"self":{"wait":18000}}`:           "self.wait",
		`{"ptr":{"ttl":1.5}}`:               "ptr.ttl",
		`{"inner":{"ttl":"2 seconds"}}`:     "inner.ttl",
		`{"inner":{"ttl":true}}`:            "inner.ttl",
		`{"inner":{"ttlx":"1s"}}`:           "inner.ttlx",
		`{"Enabled":true}`:                  "Enabled",
		`{"inner":{"count":"3"}}`:           "inner.count",
		`{"tags":"a"}`:                      "tags",
		`{"inner":{"ttl":"1s","ttl":"2s"}}`: "inner.ttl",
		`{"self":{"nope":1}}`:               "self.nope",
		// A number its field cannot hold is named by its whole path, below
		// a type with its own UnmarshalJSON too (a Config's sub-config).
		`{"inner":{"count":1.5}}`:  "inner.count",
		`{"inner":{"count":1e30}}`: "inner.count",
		`{"self":{"n":1.5}}`:       "self.n",
		`{"self":{"n":256}}`:       "self.n",
		`{"self":{"n":-1}}`:        "self.n",
		`{"ptr":{"count":2.5}}`:    "ptr.count",
		`{"weight":1e400}`:         "weight",
	} {
		var o outer
		err := Unmarshal([]byte(in), &o)
		var ce *Error
		require.True(t, errors.As(err, &ce), "%s: %v", in, err)
		require.Equal(t, path, ce.Path, in)
		require.True(t, strings.HasPrefix(err.Error(), path+": "), err.Error())
	}
	var o outer
	err := Unmarshal([]byte(`{"inner":{"ttl":2000}}`), &o)
	require.ErrorContains(t, err, "bare number 2000 is not a duration")
	err = Unmarshal([]byte(`{"Enabled":true}`), &o)
	require.ErrorContains(t, err, `did you mean "enabled"`)
}

func TestAbsentKeysKeepTheirValue(t *testing.T) {
	o := outer{Enabled: true, Inner: inner{TTL: time.Second, Count: 7}}
	require.NoError(t, Unmarshal([]byte(`{"inner":{"count":8}}`), &o))
	require.True(t, o.Enabled)
	require.Equal(t, time.Second, o.Inner.TTL)
	require.Equal(t, 8, o.Inner.Count)
	require.NoError(t, Unmarshal([]byte(`null`), &o))
	require.Equal(t, 8, o.Inner.Count)
}

// A key given as null keeps the field's value like an absent key, pointer
// fields included (encoding/json alone would set them to nil): a pointer
// setting whose nil means "the default" is not reset by a null.
func TestNullKeysKeepTheirValue(t *testing.T) {
	o := outer{Ptr: &inner{Count: 3}, Inner: inner{Count: 7}}
	require.NoError(t, Unmarshal([]byte(`{"ptr":null,"inner":{"count":null}}`), &o))
	require.NotNil(t, o.Ptr)
	require.Equal(t, 3, o.Ptr.Count)
	require.Equal(t, 7, o.Inner.Count)
}

// A duration field tagged emptyunset reads "" as null (llm-d's duration
// parameters are strings where "" means the default): a pointer stays nil,
// a value keeps what it had. Untagged, "" is still an invalid duration.
func TestEmptyUnsetDurations(t *testing.T) {
	type params struct {
		TTL     *time.Duration `json:"ttl" jsonconf:"emptyunset"`
		Timeout time.Duration  `json:"timeout" jsonconf:"emptyunset"`
		Strict  time.Duration  `json:"strict"`
	}
	p := params{Timeout: 5 * time.Second}
	require.NoError(t, Unmarshal([]byte(`{"ttl":"","timeout":""}`), &p))
	require.Nil(t, p.TTL)
	require.Equal(t, 5*time.Second, p.Timeout)
	require.NoError(t, Unmarshal([]byte(`{"ttl":"3s","timeout":"1s"}`), &p))
	require.Equal(t, 3*time.Second, *p.TTL)
	require.Equal(t, time.Second, p.Timeout)
	require.ErrorContains(t, Unmarshal([]byte(`{"strict":""}`), &p), `strict: invalid duration ""`)
	require.ErrorContains(t, Unmarshal([]byte(`{"ttl":"soon"}`), &p), `ttl: invalid duration "soon"`)
}

func TestTrailingDataAndBadJSON(t *testing.T) {
	var o outer
	require.ErrorContains(t, Unmarshal([]byte(`{} {}`), &o), "trailing data")
	require.ErrorContains(t, Unmarshal([]byte(`{"inner":`), &o), "invalid JSON")
	require.Error(t, Decode(strings.NewReader(`[1]`), &o))
	require.Error(t, Unmarshal[outer]([]byte(`{}`), nil))
}

func TestMarshalWritesDurationStrings(t *testing.T) {
	o := outer{Embedded: Embedded{Idle: time.Minute}, Inner: inner{TTL: 2 * time.Second,
		Per: map[string]time.Duration{"a": time.Millisecond}, List: []time.Duration{time.Hour}},
		Self: selfDecoding{Wait: 5 * time.Second}, Hidden: time.Hour}
	b, err := Marshal(o)
	require.NoError(t, err)
	s := string(b)
	for _, want := range []string{`"idle":"1m0s"`, `"ttl":"2s"`, `"a":"1ms"`, `"list":["1h0m0s"]`, `"wait":"5s"`} {
		require.Contains(t, s, want)
	}
	var back outer
	require.NoError(t, Unmarshal(b, &back))
	back.Self.Seen = false
	o.Hidden = 0
	require.Equal(t, o, back)
	// A type with its own MarshalJSON marshals the same through encoding/json.
	raw, err := json.Marshal(o.Self)
	require.NoError(t, err)
	require.JSONEq(t, `{"wait":"5s"}`, string(raw))
}

func TestFieldsFollowEncodingJSON(t *testing.T) {
	type A struct {
		X int
		Y int `json:"y"`
	}
	type B struct {
		X int
	}
	type C struct {
		A
		B
		Y string `json:"y"` // shallower: hides A.Y
	}
	f := fieldsOf(reflect.TypeFor[C]())
	_, hasX := f.byName["X"] // A.X and B.X collide at one depth: neither
	require.False(t, hasX)
	require.Equal(t, reflect.TypeFor[string](), f.byName["y"])
}

// A struct type with its own non-object JSON form is left to its method.
func TestStructWithOwnScalarForm(t *testing.T) {
	var v struct {
		At time.Time `json:"at"`
	}
	require.NoError(t, Unmarshal([]byte(`{"at":"2026-01-02T03:04:05Z"}`), &v))
	require.Equal(t, 2026, v.At.Year())
	require.Error(t, Unmarshal([]byte(`{"at":"yesterday"}`), &v))
}

// mapDecoding has its own UnmarshalJSON that splits its object with
// encoding/json, as the gateway's disagg block does.
type mapDecoding struct{ Keys []string }

func (m *mapDecoding) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	for k := range raw {
		m.Keys = append(m.Keys, k)
	}
	return nil
}

// A value that is no object, given to a struct that decodes itself, is an
// error naming its path, as it is for a plain struct: it used to reach the
// type's own UnmarshalJSON unchecked and come back without the path ("want
// an object, got the number 7") or naming a Go type ("cannot hold number
// map[string]json.RawMessage").
func TestNonObjectForASelfDecodingStructNamesItsPath(t *testing.T) {
	type cfg struct {
		Self  selfDecoding  `json:"self"`
		Ptr   *selfDecoding `json:"ptr"`
		Split mapDecoding   `json:"split"`
		Inner struct {
			Self selfDecoding `json:"self"`
		} `json:"inner"`
		At time.Time `json:"at"`
	}
	for in, want := range map[string]string{
		`{"self":7}`:             "self: want an object, got the number 7",
		`{"self":[1]}`:           "self: want an object, got a list",
		`{"ptr":"x"}`:            `ptr: want an object, got "x"`,
		`{"split":true}`:         "split: want an object, got true",
		`{"inner":{"self":[]}}`:  "inner.self: want an object, got a list",
		`{"at":7}`:               "at: ",
		`{"at":"yesterday"}`:     "at: ",
		`{"self":{"wait":"1x"}}`: `self.wait: invalid duration "1x"`,
	} {
		var v cfg
		err := Unmarshal([]byte(in), &v)
		require.Error(t, err, in)
		require.True(t, strings.HasPrefix(err.Error(), want), "%s: %v", in, err)
		require.NotContains(t, err.Error(), "map[", in)
	}
	require.NoError(t, Check([]byte(`{"self":{},"split":{},"at":"2026-01-02T03:04:05Z"}`), reflect.TypeFor[cfg]()))
}

// Decoding into a copy of a value leaves the original's pointer settings
// alone: the copy's pointers get pointees of their own before encoding/json
// decodes into them.
func TestDecodingIntoACopyLeavesTheOriginal(t *testing.T) {
	type settings struct {
		On  *bool          `json:"on"`
		TTL *time.Duration `json:"ttl"`
	}
	type doc struct {
		S    settings `json:"s"`
		Keep *int     `json:"keep"`
	}
	orig := doc{S: settings{On: new(true), TTL: new(time.Second)}, Keep: new(7)}
	cp := orig
	require.NoError(t, Unmarshal([]byte(`{"s":{"on":false,"ttl":"2s"}}`), &cp))
	require.False(t, *cp.S.On)
	require.Equal(t, 2*time.Second, *cp.S.TTL)
	require.True(t, *orig.S.On, "the original keeps its setting")
	require.Equal(t, time.Second, *orig.S.TTL)
	require.Equal(t, 7, *cp.Keep, "absent keys keep their value")
}

// A pointer sub-configuration is detached too, at any depth: decoding into
// a copy of a Config whose optional part is set (simengine's LoRA, say)
// used to write through into the original's part.
func TestDecodingIntoACopyLeavesTheOriginalsPointerParts(t *testing.T) {
	type leaf struct {
		Max int `json:"max"`
	}
	type part struct {
		Max  int   `json:"max"`
		Leaf *leaf `json:"leaf"`
	}
	type doc struct {
		Part   *part `json:"part"`
		Shared *leaf `json:"-"` // not decoded: keeps its identity
	}
	orig := doc{Part: &part{Max: 1, Leaf: &leaf{Max: 2}}, Shared: &leaf{}}
	cp := orig
	require.NoError(t, Unmarshal([]byte(`{"part":{"max":5,"leaf":{"max":6}}}`), &cp))
	require.Equal(t, 5, cp.Part.Max)
	require.Equal(t, 6, cp.Part.Leaf.Max)
	require.Equal(t, 1, orig.Part.Max, "the original keeps its part")
	require.Equal(t, 2, orig.Part.Leaf.Max, "the original keeps its part's part")
	require.Same(t, orig.Shared, cp.Shared, "a field JSON does not decode is not copied")

	cp = orig
	require.NoError(t, Unmarshal([]byte(`{"part":{"leaf":{"max":9}}}`), &cp))
	require.Equal(t, 1, cp.Part.Max, "absent keys keep their value")
	require.Equal(t, 9, cp.Part.Leaf.Max)
	require.Equal(t, 2, orig.Part.Leaf.Max)
}

// Load decodes over the value it is given, wraps a decoding error as the
// package asks (errors.Is finds the sentinel and the key's Error), returns
// the check's error unwrapped, and returns the zero value on any error.
func TestLoadDecodesOverStartAndChecks(t *testing.T) {
	errBad := errors.New("pkg: invalid config")
	positive := func(o outer) error {
		if o.Weight < 0 {
			return errors.New("pkg: weight is negative")
		}
		return nil
	}
	start := outer{Enabled: true, Weight: 1}
	got, err := Load(strings.NewReader(`{"inner":{"ttl":"2s"}}`), start, Under(errBad), positive)
	require.NoError(t, err)
	require.True(t, got.Enabled)
	require.Equal(t, 2*time.Second, got.Inner.TTL)

	got, err = Load(strings.NewReader(`{"inner":{"ttl":2}}`), start, Under(errBad), positive)
	require.ErrorIs(t, err, errBad)
	var keyErr *Error
	require.ErrorAs(t, err, &keyErr)
	require.Equal(t, "inner.ttl", keyErr.Path)
	require.Zero(t, got.Weight)

	_, err = Load(strings.NewReader(`{"weight":-1}`), start, Under(errBad), positive)
	require.EqualError(t, err, "pkg: weight is negative")

	_, err = Load(strings.NewReader(`{"wieght":1}`), start, Prefixed("pkg: config"), nil)
	require.ErrorContains(t, err, "pkg: config: wieght: unknown key")
	got, err = Load(strings.NewReader(`{"weight":-1}`), start, Prefixed("pkg: config"), nil) // no check
	require.NoError(t, err)
	require.Equal(t, -1.0, got.Weight)
}

// named is an integer setting that reads itself from its name, as
// wire.Format does.
type named uint8

func (n *named) UnmarshalText(b []byte) error {
	switch string(b) {
	case "low":
		*n = 0
	case "high":
		*n = 1
	default:
		return errors.New(`unknown level (want "low" or "high")`)
	}
	return nil
}

func (n named) MarshalText() ([]byte, error) { return []byte([]string{"low", "high"}[n]), nil }

// A setting that reads itself from text is a name: a string its
// UnmarshalText takes, at any depth, written back as that name; a number
// (even one its integer holds) or a refused name is an error naming the
// path.
func TestTextSettingsAreNames(t *testing.T) {
	type conf struct {
		Level  named            `json:"level"`
		Levels map[string]named `json:"levels"`
	}
	var c conf
	require.NoError(t, Unmarshal([]byte(`{"level":"high","levels":{"a":"high","b":"low"}}`), &c))
	require.Equal(t, conf{Level: 1, Levels: map[string]named{"a": 1, "b": 0}}, c)
	out, err := Marshal(c)
	require.NoError(t, err)
	require.JSONEq(t, `{"level":"high","levels":{"a":"high","b":"low"}}`, string(out))
	for doc, want := range map[string]string{
		`{"level":1}`:             `level: want a string, got the number 1`,
		`{"level":"medium"}`:      `level: unknown level (want "low" or "high")`,
		`{"levels":{"a":"loud"}}`: `levels.a: unknown level (want "low" or "high")`,
		`{"levels":{"a":true}}`:   `levels.a: want a string, got true`,
	} {
		require.EqualError(t, Unmarshal([]byte(doc), &c), want, doc)
	}
}
