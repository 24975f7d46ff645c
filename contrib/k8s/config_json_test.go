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

	got, err := LoadConfig(strings.NewReader(`{"namespace":"ns","debounce":"1s"}`))
	require.NoError(t, err)
	require.Equal(t, time.Second, got.Debounce)
	_, err = LoadConfig(strings.NewReader(`{"namespace":"ns"} {}`))
	require.Error(t, err)

	out, err := json.Marshal(c)
	require.NoError(t, err)
	require.Contains(t, string(out), `"debounce":"250ms"`)
}
