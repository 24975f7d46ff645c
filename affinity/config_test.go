package affinity

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDefaultConfig(t *testing.T) {
	cfg := DefaultConfig()
	require.NoError(t, cfg.Validate())
	require.Equal(t, 0.80, *cfg.AffinityThreshold)
	require.Zero(t, cfg.ExplorationProbability)
	require.Equal(t, 18*time.Second, *cfg.MaxTTFTPenalty)
	require.Equal(t, 15928.0, cfg.PeakPrefillThroughput)
	require.Equal(t, KeepSticky, cfg.MissingSignalPolicy)
	require.False(t, cfg.IncludeRequestTokens)
	require.Equal(t, DefaultCrowdingRatio, *cfg.CrowdingRatio)
	require.Equal(t, DefaultCrowdingMaxExtraPrefill, *cfg.CrowdingMaxExtraPrefill)
	require.Equal(t, DefaultCrowdingUnboundRatio, *cfg.CrowdingUnboundRatio)
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		key    string // "" = valid
	}{
		{"threshold 0 disables", func(c *Config) { c.AffinityThreshold = new(float64(0)) }, ""},
		{"threshold 1", func(c *Config) { c.AffinityThreshold = new(float64(1)) }, ""},
		{"threshold negative", func(c *Config) { c.AffinityThreshold = new(float64(-0.1)) }, "affinityThreshold"},
		{"threshold above 1", func(c *Config) { c.AffinityThreshold = new(float64(1.01)) }, "affinityThreshold"},
		{"threshold NaN", func(c *Config) { c.AffinityThreshold = new(float64(math.NaN())) }, "affinityThreshold"},
		{"exploration 1", func(c *Config) { c.ExplorationProbability = 1 }, ""},
		{"exploration negative", func(c *Config) { c.ExplorationProbability = -0.5 }, "explorationProbability"},
		{"exploration above 1", func(c *Config) { c.ExplorationProbability = 1.5 }, "explorationProbability"},
		{"exploration NaN", func(c *Config) { c.ExplorationProbability = math.NaN() }, "explorationProbability"},
		{"penalty negative", func(c *Config) { c.MaxTTFTPenalty = new(time.Duration(-time.Millisecond)) }, "maxTTFTPenalty"},
		{"gate off without throughput", func(c *Config) { c.MaxTTFTPenalty = new(time.Duration(0)); c.PeakPrefillThroughput = 0 }, ""},
		{"throughput 0 means the default", func(c *Config) { c.PeakPrefillThroughput = 0 }, ""},
		{"throughput negative", func(c *Config) { c.PeakPrefillThroughput = -1 }, "peakPrefillThroughput"},
		{"throughput infinite", func(c *Config) { c.PeakPrefillThroughput = math.Inf(1) }, "peakPrefillThroughput"},
		{"throughput NaN", func(c *Config) { c.PeakPrefillThroughput = math.NaN() }, "peakPrefillThroughput"},
		{"policy widen", func(c *Config) { c.MissingSignalPolicy = Widen }, ""},
		{"policy empty means keep_sticky", func(c *Config) { c.MissingSignalPolicy = "" }, ""},
		{"policy unknown", func(c *Config) { c.MissingSignalPolicy = "zero" }, "missingSignalPolicy"},
		{"crowding 0 disables", func(c *Config) { c.CrowdingRatio = new(0.0) }, ""},
		{"crowding negative", func(c *Config) { c.CrowdingRatio = new(-1.0) }, "crowdingRatio"},
		{"crowding infinite", func(c *Config) { c.CrowdingRatio = new(math.Inf(1)) }, "crowdingRatio"},
		{"crowding NaN", func(c *Config) { c.CrowdingRatio = new(math.NaN()) }, "crowdingRatio"},
		{"crowding extra prefill 0: no bound", func(c *Config) { c.CrowdingMaxExtraPrefill = new(time.Duration(0)) }, ""},
		{"crowding extra prefill negative", func(c *Config) { c.CrowdingMaxExtraPrefill = new(-time.Millisecond) }, "crowdingMaxExtraPrefill"},
		{"crowding unbound 0: never", func(c *Config) { c.CrowdingUnboundRatio = new(0.0) }, ""},
		{"crowding unbound negative", func(c *Config) { c.CrowdingUnboundRatio = new(-1.0) }, "crowdingUnboundRatio"},
		{"crowding unbound infinite", func(c *Config) { c.CrowdingUnboundRatio = new(math.Inf(1)) }, "crowdingUnboundRatio"},
		{"crowding unbound NaN", func(c *Config) { c.CrowdingUnboundRatio = new(math.NaN()) }, "crowdingUnboundRatio"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.mutate(&cfg)
			err := cfg.Validate()
			if tc.key == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidConfig)
			require.Contains(t, err.Error(), tc.key)
		})
	}
}

func TestLoadConfig(t *testing.T) {
	cfg, err := LoadConfig(strings.NewReader(`{
		"affinityThreshold": 0.6,
		"explorationProbability": 0.01,
		"maxTTFTPenalty": "30s",
		"peakPrefillThroughput": 39065,
		"missingSignalPolicy": "widen",
		"includeRequestTokens": true,
		"crowdingRatio": 2,
		"crowdingMaxExtraPrefill": "150ms",
		"crowdingUnboundRatio": 10
	}`))
	require.NoError(t, err)
	require.Equal(t, Config{
		AffinityThreshold:       new(0.6),
		ExplorationProbability:  0.01,
		MaxTTFTPenalty:          new(30 * time.Second),
		PeakPrefillThroughput:   39065,
		MissingSignalPolicy:     Widen,
		IncludeRequestTokens:    true,
		CrowdingRatio:           new(2.0),
		CrowdingMaxExtraPrefill: new(150 * time.Millisecond),
		CrowdingUnboundRatio:    new(10.0),
	}, cfg)
}

func TestLoadConfigMissingKeysKeepDefaults(t *testing.T) {
	cfg, err := LoadConfig(strings.NewReader(`{"peakPrefillThroughput": 1970}`))
	require.NoError(t, err)
	want := DefaultConfig()
	want.PeakPrefillThroughput = 1970
	require.Equal(t, want, cfg)

	cfg, err = LoadConfig(strings.NewReader(`{"maxTTFTPenalty": null}`))
	require.NoError(t, err)
	require.Equal(t, DefaultConfig(), cfg, "null keeps the default")
}

func TestLoadConfigPenaltyIsADurationString(t *testing.T) {
	for in, want := range map[string]time.Duration{
		`"18s"`:    18 * time.Second,
		`"1m30s"`:  90 * time.Second,
		`"1500ms"`: 1500 * time.Millisecond,
		`"0s"`:     0,
	} {
		cfg, err := LoadConfig(strings.NewReader(`{"maxTTFTPenalty": ` + in + `}`))
		require.NoError(t, err, in)
		require.Equal(t, want, *cfg.MaxTTFTPenalty, in)
	}
	// A bare number used to be read as milliseconds; now it is an error that
	// names the key and says why.
	for _, in := range []string{`18000`, `1500.5`, `0`} {
		_, err := LoadConfig(strings.NewReader(`{"maxTTFTPenalty": ` + in + `}`))
		require.ErrorIs(t, err, ErrInvalidConfig, in)
		require.ErrorContains(t, err, "maxTTFTPenalty: bare number "+in+" is not a duration", in)
	}
}

func TestLoadConfigRejects(t *testing.T) {
	for name, in := range map[string]string{
		"unknown key":           `{"affinityThreshold": 0.8, "maxTTFTPenaltyMs": 18000}`,
		"misplaced key":         `{"speculativeIndexing": true}`,
		"trailing data":         `{"affinityThreshold": 0.8} {}`,
		"not an object":         `[1, 2]`,
		"bad duration string":   `{"maxTTFTPenalty": "18 seconds"}`,
		"duration as bool":      `{"maxTTFTPenalty": true}`,
		"duration out of range": `{"maxTTFTPenalty": 1e300}`,
		"wrong type":            `{"affinityThreshold": "high"}`,
		"empty":                 ``,
	} {
		_, err := LoadConfig(strings.NewReader(in))
		require.Error(t, err, name)
	}
	_, err := LoadConfig(strings.NewReader(`{"maxTTFTPenalty": -5}`))
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = LoadConfig(strings.NewReader(`{"affinityThreshold": 2}`))
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = LoadConfig(strings.NewReader(`{"affinityThreshold": 0.8, "bogus": 1}`))
	require.ErrorContains(t, err, `bogus: unknown key`)
}

// A Config nested in a larger configuration rejects unknown keys even when
// the outer decoder is lenient.
func TestConfigNestedRejectsUnknownKeys(t *testing.T) {
	var outer struct {
		Affinity Config `json:"affinity"`
	}
	outer.Affinity = DefaultConfig()
	require.Error(t, json.Unmarshal([]byte(`{"affinity": {"threshold": 0.9}}`), &outer))

	require.ErrorContains(t, json.Unmarshal([]byte(`{"affinity": {"maxTTFTPenalty": 5000}}`), &outer), "bare number")
	require.NoError(t, json.Unmarshal([]byte(`{"affinity": {"maxTTFTPenalty": "5s"}}`), &outer))
	require.Equal(t, 5*time.Second, *outer.Affinity.MaxTTFTPenalty)
	require.Equal(t, 0.8, *outer.Affinity.AffinityThreshold)
}

func TestConfigJSONRoundTrip(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxTTFTPenalty = new(time.Duration(2500 * time.Millisecond))
	cfg.MissingSignalPolicy = Widen
	data, err := json.Marshal(cfg)
	require.NoError(t, err)
	require.JSONEq(t, `{
		"affinityThreshold": 0.8,
		"explorationProbability": 0,
		"maxTTFTPenalty": "2.5s",
		"peakPrefillThroughput": 15928,
		"missingSignalPolicy": "widen",
		"includeRequestTokens": false,
		"crowdingRatio": 1.5,
		"crowdingMaxExtraPrefill": "150ms",
		"crowdingUnboundRatio": 16
	}`, string(data))
	back, err := LoadConfig(bytes.NewReader(data))
	require.NoError(t, err)
	require.Equal(t, cfg, back)
}

// The zero Config means the defaults: a Filter built from it runs with the
// configuration DefaultConfig shows, while an explicit 0 threshold or
// penalty keeps its own meaning (filter or gate off).
func TestZeroConfigMeansTheDefaults(t *testing.T) {
	zero, err := New(Config{}, Options{})
	require.NoError(t, err)
	def, err := New(DefaultConfig(), Options{})
	require.NoError(t, err)
	require.Equal(t, def.Config(), zero.Config())
	require.Equal(t, DefaultAffinityThreshold, *zero.Config().AffinityThreshold)
	require.Equal(t, def.GateTokens(), zero.GateTokens())
	require.NotZero(t, zero.GateTokens())

	cfg, err := LoadConfig(strings.NewReader(`{"affinityThreshold": 0, "maxTTFTPenalty": "0s"}`))
	require.NoError(t, err)
	off, err := New(cfg, Options{})
	require.NoError(t, err)
	require.Zero(t, *off.Config().AffinityThreshold, "0 disables the filter")
	require.Zero(t, off.GateTokens(), "0 disables the gate")
}
