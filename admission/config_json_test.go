package admission

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Objective, Saturation and Headroom decode by kvroute's configuration
// rules on their own, not only inside a Config: decoded alone with
// encoding/json, an objective's queueTimeout of 5000000000 was read as 5 s
// of nanoseconds and a misspelt key was dropped without a word.
func TestSectionsDecodeStrictlyAlone(t *testing.T) {
	for _, c := range []struct {
		doc, err string
		into     any
	}{
		{`{"name":"batch","priority":-1,"queueTimeout":5000000000}`, "queueTimeout: bare number 5000000000 is not a duration", new(Objective)},
		{`{"name":"batch","priorty":-1}`, "priorty: unknown key", new(Objective)},
		{`[{"name":"a"},{"name":"b","queueTimout":"1s"}]`, "queueTimout: unknown key", new([]Objective)},
		{`{"maxPrefillBacklog":2000000000}`, "maxPrefillBacklog: bare number 2000000000 is not a duration", new(Saturation)},
		{`{"maxOpenRequest":8}`, "maxOpenRequest: unknown key", new(Saturation)},
		{`{"maxWaitng":1}`, "maxWaitng: unknown key", new(Headroom)},
		{`{"MaxHeld":1}`, `did you mean "maxHeld"?`, new(Headroom)},
	} {
		require.ErrorContains(t, json.Unmarshal([]byte(c.doc), c.into), c.err, c.doc)
	}

	var o Objective
	require.NoError(t, json.Unmarshal([]byte(`{"name":"interactive","priority":1,"queueTimeout":"5s"}`), &o))
	require.Equal(t, Objective{Name: "interactive", Priority: 1, QueueTimeout: 5 * time.Second}, o)
	var s Saturation
	require.NoError(t, json.Unmarshal([]byte(`{"maxPrefillBacklog":"2s","peakPrefillThroughput":15928,"maxOpenRequests":8}`), &s))
	require.Equal(t, Saturation{MaxPrefillBacklog: 2 * time.Second, PeakPrefillThroughput: 15928, MaxOpenRequests: 8}, s)

	// Inside a Config the errors still name the whole path, and what
	// Marshal writes decodes back.
	_, err := LoadConfig(strings.NewReader(`{"objectives":[{"name":"a","queueTimeout":7}]}`))
	require.ErrorContains(t, err, "objectives[0].queueTimeout: bare number 7")
	_, err = LoadConfig(strings.NewReader(`{"saturation":{"maxPrefillBacklog":"1s","bogus":1}}`))
	require.ErrorContains(t, err, "saturation.bogus: unknown key")
	in := Config{
		Objectives: []Objective{{Name: "a", Priority: 2, QueueTimeout: 1500 * time.Millisecond}},
		Saturation: Saturation{MaxPrefillBacklog: 3 * time.Second, MaxOpenRequests: 4},
		Headroom:   Headroom{MaxWaiting: 2, MaxKVCache: 0.5, MaxHeld: 3},
	}
	out, err := json.Marshal(in)
	require.NoError(t, err)
	require.Contains(t, string(out), `"queueTimeout":"1.5s"`)
	require.Contains(t, string(out), `"maxPrefillBacklog":"3s"`)
	var back Config
	require.NoError(t, json.Unmarshal(out, &back))
	require.Equal(t, in, back)
}
