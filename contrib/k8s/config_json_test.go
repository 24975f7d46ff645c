package k8s

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Discovery's configuration decodes strictly: a bare number for a duration
// (once read as nanoseconds), an unknown key and a key in the wrong case are
// errors naming the key, and a duration string works.
func TestConfigDecodesStrictly(t *testing.T) {
	var c Config
	require.NoError(t, json.Unmarshal([]byte(`{"namespace":"ns","debounce":"250ms","targetPorts":[8000]}`), &c))
	require.Equal(t, Config{Namespace: "ns", Debounce: 250 * time.Millisecond, TargetPorts: []int32{8000}}, c)

	var bare Config
	require.ErrorContains(t, json.Unmarshal([]byte(`{"debounce":250}`), &bare), "debounce: bare number 250 is not a duration")
	require.ErrorContains(t, json.Unmarshal([]byte(`{"debounce":"soon"}`), &bare), `debounce: invalid duration "soon"`)
	require.ErrorContains(t, json.Unmarshal([]byte(`{"namespaces":"ns"}`), &bare), "namespaces: unknown key")
	require.ErrorContains(t, json.Unmarshal([]byte(`{"Namespace":"ns"}`), &bare), `Namespace: unknown key (did you mean "namespace"?`)

	got, err := LoadConfig(strings.NewReader(`{"namespace":"ns","debounce":"1s","pool":"p"}`))
	require.NoError(t, err)
	require.Equal(t, time.Second, got.Debounce)
	_, err = LoadConfig(strings.NewReader(`{"namespace":"ns"} {}`))
	require.Error(t, err)

	out, err := json.Marshal(c)
	require.NoError(t, err)
	require.Contains(t, string(out), `"debounce":"250ms"`)
}

// LoadConfig validates what it read, as every kvroute LoadConfig does: a
// configuration New would refuse is refused where the file is read, with
// an error naming the configuration and the mistake.
func TestLoadConfigValidates(t *testing.T) {
	for doc, want := range map[string]string{
		`{"pool":"p"}`: "a namespace is required",
		`{"namespace":"ns","pool":"p","debounce":"-1s"}`:                                    "debounce -1s is negative",
		`{"namespace":"ns","pool":"p","maxEndpoints":-1}`:                                   "maxEndpoints -1 is negative",
		`{"namespace":"ns","pool":"p","poolVersion":"v9"}`:                                  `unknown poolVersion "v9"`,
		`{"namespace":"ns","pool":"p","selector":"a=b"}`:                                    "set either pool or selector and targetPorts, not both",
		`{"namespace":"ns","targetPorts":[8000]}`:                                           "an empty selector",
		`{"namespace":"ns","selector":"a in ("}`:                                            "selector:",
		`{"namespace":"ns","selector":"a=b"}`:                                               "targetPorts are required",
		`{"namespace":"ns","selector":"a=b","targetPorts":[0]}`:                             "target port 0 out of range",
		`{"namespace":"ns","selector":"a=b","targetPorts":[8000,8000]}`:                     "target port 8000 given twice",
		`{"namespace":"ns","selector":"a=b","targetPorts":[8000],"poolVersion":"v1alpha2"}`: "poolVersion applies to a pool, not to a selector",
		`{"namespace":"ns","selector":"a=b","targetPorts":[8000],"poolVersion":"v1"}`:       "poolVersion applies to a pool, not to a selector",
	} {
		_, err := LoadConfig(strings.NewReader(doc))
		require.ErrorContains(t, err, "k8s: config: "+want, doc)
	}
	for _, doc := range []string{
		`{"namespace":"ns","pool":"p","poolVersion":"v1alpha2","debounce":"0s"}`,
		`{"namespace":"ns","selector":"app=vllm","targetPorts":[8000,8001],"maxEndpoints":5}`,
	} {
		_, err := LoadConfig(strings.NewReader(doc))
		require.NoError(t, err, doc)
	}
}
