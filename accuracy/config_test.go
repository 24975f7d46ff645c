package accuracy

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A Config decodes strictly wherever it is decoded, even by a lenient
// encoding/json caller: unknown keys and bare-number durations are errors.
func TestConfigDecodesStrictly(t *testing.T) {
	var outer struct {
		Accuracy Config `json:"accuracy"`
	}
	require.ErrorContains(t, json.Unmarshal([]byte(`{"accuracy":{"windw":5}}`), &outer), "windw: unknown key")
	require.ErrorContains(t, json.Unmarshal([]byte(`{"accuracy":{"resyncInterval":60000}}`), &outer), "bare number")
	require.NoError(t, json.Unmarshal([]byte(`{"accuracy":{"resyncInterval":"2m","window":5}}`), &outer))
	require.Equal(t, Config{Window: 5, ResyncInterval: 2 * time.Minute}, outer.Accuracy)
	data, err := json.Marshal(outer.Accuracy)
	require.NoError(t, err)
	require.Contains(t, string(data), `"resyncInterval":"2m0s"`)
}

// The zero Config means the defaults.
func TestZeroConfigMeansTheDefaults(t *testing.T) {
	zero, err := New(Config{}, 64, Options{})
	require.NoError(t, err)
	def, err := New(Config{Window: DefaultWindow, MissRatio: DefaultMissRatio, ResyncInterval: DefaultResyncInterval}, 64, Options{})
	require.NoError(t, err)
	require.Equal(t, def.cfg, zero.cfg)
}

// A MissRatio that is not a number is outside [0, 1] and refused by name:
// it compared false with every share, so an endpoint whose predictions all
// missed was never marked inaccurate, and New took it silently.
func TestValidateRefusesANaNMissRatio(t *testing.T) {
	require.ErrorContains(t, Config{MissRatio: math.NaN()}.Validate(), "accuracy.missRatio NaN is outside [0, 1)")
	_, err := New(Config{MissRatio: math.NaN()}, 64, Options{})
	require.Error(t, err)
	require.NoError(t, Config{MissRatio: 0.99}.Validate())
}

// A MissRatio of 1 is refused by name: an endpoint is marked inaccurate
// when more than MissRatio of its window missed, and no share is more than
// 1, so New took it and an endpoint whose every prediction missed was never
// marked (nor resynced).
func TestValidateRefusesAMissRatioOfOne(t *testing.T) {
	require.ErrorContains(t, Config{MissRatio: 1}.Validate(), "accuracy.missRatio 1 is outside [0, 1)")
	_, err := New(Config{MissRatio: 1}, 64, Options{})
	require.Error(t, err)

	l, _, _ := newLoop(t, Config{Window: 2, MissRatio: 0.99}, nil)
	for range 2 {
		observe(l, Prediction{Endpoint: ep, PromptTokens: 256, CachedTokens: 256}, 0)
	}
	require.True(t, l.Inaccurate(ep), "the highest ratio accepted still marks an endpoint whose every prediction missed")
}
