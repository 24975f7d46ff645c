package models

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/jsonconf/conftest"
)

// A PollConfig decodes by kvroute's configuration rules on its own, not only
// inside a Config: a key in another case, a key given twice and an unknown
// key are errors naming the key, a duration is a duration string, keys not
// present keep the value they had, and what Marshal writes decodes back.
func TestPollConfigDecodesStrictly(t *testing.T) {
	defaults := PollConfig{Interval: DefaultPollInterval, Timeout: DefaultPollTimeout, MaxModels: DefaultMaxModels}
	in := PollConfig{Enabled: true, Interval: 90 * time.Second, Timeout: 250 * time.Millisecond, MaxModels: 7}
	require.NoError(t, conftest.Check(defaults, []conftest.Case[PollConfig]{
		{Name: "case variant", Doc: `{"Interval":"1s"}`, Err: `Interval: unknown key (did you mean "interval"?`},
		{Name: "repeated key", Doc: `{"maxModels":1,"maxModels":2}`, Err: "maxModels: key given twice"},
		{Name: "unknown key", Doc: `{"intervall":"1s"}`, Err: "intervall: unknown key"},
		{Name: "bare number", Doc: `{"timeout":250}`, Err: "timeout: bare number 250 is not a duration"},
		{Name: "duration string", Doc: `{"timeout":"250ms"}`,
			Want: func(c *PollConfig) { c.Timeout = 250 * time.Millisecond }},
		{Name: "absent keys keep defaults", Doc: `{"enabled":true}`,
			Want: func(c *PollConfig) { c.Enabled = true }},
	}, in))
	out, err := json.Marshal(in)
	require.NoError(t, err)
	require.JSONEq(t, `{"enabled":true,"interval":"1m30s","timeout":"250ms","maxModels":7}`, string(out))
}

// Config.Adapters names adapters' base models: names are checked as
// Served's are, a base is a base model (not the adapter itself, not
// another adapter: no chain, no cycle), a Served entry listing an adapter
// lists its base; the key decodes strictly, and without a poller Adapter
// reports what it says.
func TestConfigAdaptersAreValidated(t *testing.T) {
	ok := Config{Served: map[string][]string{"10.0.0.1:8000": {"llama", "sql"}, "10.0.0.2:8000": {"qwen"}},
		Adapters: map[string]string{"sql": "llama", "chat": "llama"}}
	require.NoError(t, ok.Validate())
	for name, c := range map[string]struct {
		cfg Config
		err string
	}{
		"self":            {Config{Adapters: map[string]string{"sql": "sql"}}, "adapters[sql]: an adapter is not its own base model"},
		"chain":           {Config{Adapters: map[string]string{"sql": "llama", "sql2": "sql"}}, `adapters[sql2]: its base "sql" is itself an adapter`},
		"cycle":           {Config{Adapters: map[string]string{"a": "b", "b": "a"}}, `adapters[a]: its base "b" is itself an adapter`},
		"empty base":      {Config{Adapters: map[string]string{"sql": ""}}, "adapters[sql]: empty model name"},
		"comma in name":   {Config{Adapters: map[string]string{"a,b": "llama"}}, "adapters: model name \"a,b\""},
		"control in base": {Config{Adapters: map[string]string{"sql": "ll\tama"}}, "non-printable"},
		"served without base": {Config{Served: map[string][]string{"10.0.0.1:8000": {"sql"}}, Adapters: map[string]string{"sql": "llama"}},
			`served[10.0.0.1:8000] lists the adapter "sql" without its base model "llama"`},
	} {
		err := c.cfg.Validate()
		require.ErrorIs(t, err, ErrInvalidConfig, name)
		require.ErrorContains(t, err, c.err, name)
		_, err = New(c.cfg, Options{})
		require.ErrorIs(t, err, ErrInvalidConfig, name)
	}

	var c Config
	require.NoError(t, c.UnmarshalJSON([]byte(`{"served":{"10.0.0.1:8000":["llama","sql"]},"adapters":{"sql":"llama"}}`)))
	require.Equal(t, map[string]string{"sql": "llama"}, c.Adapters)
	require.ErrorContains(t, c.UnmarshalJSON([]byte(`{"adapter":{"sql":"llama"}}`)), "adapter: unknown key")
	out, err := json.Marshal(Config{Adapters: map[string]string{"sql": "llama"}})
	require.NoError(t, err)
	require.Contains(t, string(out), `"adapters":{"sql":"llama"}`)
	require.NotContains(t, string(out), "adapters\":null")
	out, err = json.Marshal(Config{})
	require.NoError(t, err)
	require.NotContains(t, string(out), "adapters", "the zero value leaves it out")

	r, err := New(ok, Options{})
	require.NoError(t, err)
	defer r.Close()
	base, isAdapter := r.Adapter(nil, "sql")
	require.True(t, isAdapter, "no poller: the configuration alone")
	require.Equal(t, "llama", base)
	_, isAdapter = r.Adapter(nil, "llama")
	require.False(t, isAdapter)
}
