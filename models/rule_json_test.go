package models

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// A rewrite table decodes by kvroute's configuration rules on its own, not
// only inside a Config: decoded alone with encoding/json, a misspelt
// "wieght" made the target weigh the default 1, and "Targets" matched
// targets case-insensitively.
func TestRulesDecodeStrictlyAlone(t *testing.T) {
	for _, c := range []struct {
		doc, want string
		into      any
	}{
		{`[{"model":"llama","targets":[{"model":"a","wieght":90}]}]`, "wieght: unknown key", new([]Rule)},
		{`[{"model":"llama","Targets":[{"model":"a"}]}]`, `Targets: unknown key (did you mean "targets"?`, new([]Rule)},
		{`{"model":"llama","model":"qwen"}`, "model: key given twice", new(Rule)},
		{`{"model":"a","weight":1.5}`, "weight: cannot hold number 1.5", new(Target)},
	} {
		require.ErrorContains(t, json.Unmarshal([]byte(c.doc), c.into), c.want, c.doc)
	}
	var rules []Rule
	require.NoError(t, json.Unmarshal([]byte(`[{"model":"llama","targets":[{"model":"a","weight":90},{"model":"b","weight":10}]}]`), &rules))
	require.Equal(t, []Rule{{Model: "llama", Targets: []Target{{Model: "a", Weight: 90}, {Model: "b", Weight: 10}}}}, rules)
	out, err := json.Marshal(rules)
	require.NoError(t, err)
	var back []Rule
	require.NoError(t, json.Unmarshal(out, &back))
	require.Equal(t, rules, back)
}
