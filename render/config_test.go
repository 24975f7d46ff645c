package render

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDefaultConfigMatchesReference(t *testing.T) {
	c := DefaultConfig()
	require.NoError(t, c.Validate())
	require.Equal(t, 5*time.Second, c.Timeout)
	require.Equal(t, 30*time.Second, c.MMTimeout)
	require.Equal(t, DefaultAttemptTimeout, *c.AttemptTimeout, "kvroute's per-attempt cap")
	require.True(t, *c.OmitMMKwargs)
	require.False(t, c.PrefillOnly)
	require.Equal(t, ModeAuto, c.MessagesRenderMode)
	require.Equal(t, ModeAuto, c.ResponsesRenderMode)
	require.EqualValues(t, 64<<20, c.MaxResponseBytes)
}

func TestLoadConfig(t *testing.T) {
	c, err := LoadConfig(strings.NewReader(`{"modelName":"Qwen/Qwen3-8B","attemptTimeout":"2s","timeout":"1500ms","messagesRenderMode":"legacy","prefillOnly":true}`))
	require.NoError(t, err)
	require.Equal(t, "Qwen/Qwen3-8B", c.ModelName)
	require.Equal(t, 2*time.Second, *c.AttemptTimeout)
	require.Equal(t, 1500*time.Millisecond, c.Timeout)
	require.Equal(t, 30*time.Second, c.MMTimeout, "missing keys keep their defaults")
	require.Equal(t, ModeLegacy, c.MessagesRenderMode)
	require.True(t, *c.OmitMMKwargs)
	require.True(t, c.PrefillOnly)

	// Round trip.
	b, err := json.Marshal(c)
	require.NoError(t, err)
	require.Contains(t, string(b), `"attemptTimeout":"2s"`)
	back, err := LoadConfig(strings.NewReader(string(b)))
	require.NoError(t, err)
	require.Equal(t, c, back)
}

func TestLoadConfigRejectsBadInput(t *testing.T) {
	for in, want := range map[string]string{
		`{"tiemout":"5s"}`:                       "tiemout: unknown key",
		`{"timeout":5}`:                          "timeout: bare number 5 is not a duration",
		`{"timeout":"5 seconds"}`:                "invalid duration",
		`{"timeout":"-1s"}`:                      "timeout must be > 0",
		`{"attemptTimeout":"-2s"}`:               "attemptTimeout must be >= 0",
		`{"messagesRenderMode":"fast"}`:          "messagesRenderMode must be",
		`{"responsesRenderMode":"NATIVE"}`:       "responsesRenderMode must be",
		`{"url":"localhost:8000"}`:               "url:",
		`{"url":"http://h:8000?x=1"}`:            "no query",
		`{"maxResponseBytes":-1}`:                "maxResponseBytes",
		`{} {}`:                                  "trailing data",
		`{"endpointDiscovery":{"portRules":[]}}`: "endpointDiscovery: unknown key",
	} {
		_, err := LoadConfig(strings.NewReader(in))
		require.ErrorContains(t, err, want, in)
	}
}

// A Config nested in a larger JSON document stays strict even when the outer
// decoder is not.
func TestConfigUnmarshalStrictWhenNested(t *testing.T) {
	var outer struct {
		Render Config `json:"render"`
	}
	outer.Render = DefaultConfig()
	require.ErrorContains(t, json.Unmarshal([]byte(`{"render":{"mmTimeout":"10s","bogus":1}}`), &outer), "bogus: unknown key")
	require.NoError(t, json.Unmarshal([]byte(`{"render":{"mmTimeout":"10s"}}`), &outer))
	require.Equal(t, 10*time.Second, outer.Render.MMTimeout)
	require.Equal(t, 5*time.Second, outer.Render.Timeout)
}

func TestNewAppliesDefaultsToZeroConfig(t *testing.T) {
	c, err := New(Config{}, Options{})
	require.NoError(t, err)
	defer c.Close()
	require.Equal(t, DefaultTimeout, c.cfg.Timeout)
	require.Equal(t, DefaultMMTimeout, c.cfg.MMTimeout)
	require.Equal(t, ModeAuto, c.cfg.MessagesRenderMode)
	require.EqualValues(t, DefaultMaxResponseBytes, c.cfg.MaxResponseBytes)

	_, err = New(Config{Timeout: -1}, Options{})
	require.ErrorIs(t, err, ErrInvalidConfig)
}

// The zero Config means the defaults: a Client built from it runs with the
// configuration DefaultConfig shows, while an explicit false omitMMKwargs or
// 0 attemptTimeout keeps its own meaning.
func TestZeroConfigMeansTheDefaults(t *testing.T) {
	zero, err := New(Config{}, Options{})
	require.NoError(t, err)
	def, err := New(DefaultConfig(), Options{})
	require.NoError(t, err)
	require.Equal(t, def.cfg, zero.cfg)
	require.Equal(t, DefaultConfig(), zero.cfg)
	require.True(t, *zero.cfg.OmitMMKwargs)
	require.Equal(t, DefaultAttemptTimeout, *zero.cfg.AttemptTimeout)

	cfg, err := LoadConfig(strings.NewReader(`{"omitMMKwargs": false, "attemptTimeout": "0s"}`))
	require.NoError(t, err)
	off, err := New(cfg, Options{})
	require.NoError(t, err)
	require.False(t, *off.cfg.OmitMMKwargs)
	require.Zero(t, *off.cfg.AttemptTimeout, "0 means no per-attempt cap")
}
