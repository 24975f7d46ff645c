package kvroute

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/jsonconf"
	"github.com/kvroute/kvroute/kvevents"
)

func TestLoadConfigBareNumberDurationsAreErrorsNamingTheKey(t *testing.T) {
	for in, path := range map[string]string{
		`{"speculative":{"ttl":2000}}`:                                     "speculative.ttl",
		`{"affinity":{"maxTTFTPenalty":18000}}`:                            "affinity.maxTTFTPenalty",
		`{"index":{"sweepInterval":1000000000}}`:                           "index.sweepInterval",
		`{"events":{"idleTimeout":60}}`:                                    "events.idleTimeout",
		`{"events":{"replayClient":{"timeout":120}}}`:                      "events.replayClient.timeout",
		`{"render":{"attemptTimeout":2}}`:                                  "render.attemptTimeout",
		`{"affinity":{"maxTTFTPenalty":18000},"speculative":{"ttl":2000}}`: "",
	} {
		_, err := LoadConfig(strings.NewReader(in))
		require.ErrorIs(t, err, ErrInvalidConfig, in)
		require.ErrorContains(t, err, "bare number", in)
		var ce *jsonconf.Error
		require.True(t, errors.As(err, &ce), "%s: %v", in, err)
		if path != "" {
			require.Equal(t, path, ce.Path, in)
		}
	}
}

func TestLoadConfigDurationStringsEverywhere(t *testing.T) {
	cfg, err := LoadConfig(strings.NewReader(`{
		"speculative": {"ttl": "2s"},
		"affinity": {"maxTTFTPenalty": "18s"},
		"index": {"sweepInterval": "500ms"},
		"render": {"timeout": "5s", "mmTimeout": "30s", "attemptTimeout": "2s"},
		"events": {"idleTimeout": "1m", "replayCooldown": "30s", "handshakeTimeout": "1s",
			"dialTimeout": "1s", "minBackoff": "100ms", "maxBackoff": "2s",
			"replayClient": {"timeout": "2m", "idleTimeout": "2s", "backoff": "100ms", "handshakeTimeout": "1s"}}
	}`))
	require.NoError(t, err)
	require.Equal(t, 2*time.Second, cfg.Speculative.TTL)
	require.Equal(t, 18*time.Second, *cfg.Affinity.MaxTTFTPenalty)
	require.Equal(t, 500*time.Millisecond, cfg.Index.SweepInterval)
	require.Equal(t, 2*time.Second, *cfg.Render.AttemptTimeout)
	require.Equal(t, time.Minute, cfg.Events.IdleTimeout)
	require.Equal(t, 2*time.Minute, cfg.Events.ReplayClient.Timeout)
	require.True(t, *cfg.Events.Enabled, "events.enabled keeps its default")
	require.Equal(t, kvevents.DefaultEventsPort, cfg.Events.EventsPort)
}

func TestDefaultConfigMarshalsDurationsAsStringsAndRoundTrips(t *testing.T) {
	def := DefaultConfig()
	data, err := json.Marshal(def)
	require.NoError(t, err)
	for _, want := range []string{`"ttl":"2s"`, `"maxTTFTPenalty":"18s"`, `"idleTimeout":"1m0s"`, `"attemptTimeout":"2s"`, `"enabled":true`} {
		require.Contains(t, string(data), want)
	}
	back, err := LoadConfig(bytes.NewReader(data))
	require.NoError(t, err)
	require.Equal(t, def, back)

	// Over a zero Config too: every key DefaultConfig sets is written.
	var zero Config
	require.NoError(t, json.Unmarshal(data, &zero))
	require.Equal(t, def, zero)
}

func TestLoadConfigUnknownKeysNameTheirPath(t *testing.T) {
	for in, want := range map[string]string{
		`{"speculative":{"ttlx":"2s"}}`:       "speculative.ttlx: unknown key",
		`{"events":{"enabeld":true}}`:         "events.enabeld: unknown key",
		`{"events":{"replayClient":{"x":1}}}`: "events.replayClient.x: unknown key",
		`{"render":{"URL":"http://a:1"}}`:     `render.URL: unknown key (did you mean "url"?`,
		`{"Model":"m"}`:                       `Model: unknown key (did you mean "model"?`,
		`{"model":"a","model":"b"}`:           "model: key given twice",
		`{"blockSize":"64"}`:                  `blockSize: want a number, got "64"`,
	} {
		_, err := LoadConfig(strings.NewReader(in))
		require.ErrorIs(t, err, ErrInvalidConfig, in)
		require.ErrorContains(t, err, want, in)
	}
}

// A section given as something other than an object is an error naming the
// section, whichever package's Config decodes it: the sections whose types
// decode themselves used to answer "want an object, got a list" with no key,
// or, for events, with the Go type of a struct.
func TestLoadConfigNonObjectSectionsNameTheirPath(t *testing.T) {
	var sections map[string]json.RawMessage
	data, err := json.Marshal(DefaultConfig())
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &sections))
	n := 0
	for key, raw := range sections {
		if !strings.HasPrefix(string(raw), "{") {
			continue
		}
		n++
		for _, v := range []string{"[1]", "7", `"x"`, "true"} {
			_, err := LoadConfig(strings.NewReader(`{"` + key + `":` + v + `}`))
			require.ErrorIs(t, err, ErrInvalidConfig, key)
			require.ErrorContains(t, err, "invalid config: "+key+": want an object, got ", "%s: %s", key, v)
		}
	}
	require.GreaterOrEqual(t, n, 10, "the Config has sections")
	_, err = LoadConfig(strings.NewReader(`{"events":{"replayClient":5}}`))
	require.ErrorContains(t, err, "events.replayClient: want an object, got the number 5")
}

// The block size, the speculative TTL and the model are set once, at the top
// level, and passed down: their keys under index, render and events are
// errors naming the top-level key, and so are the Go fields set.
func TestLoadConfigRejectsPassedDownKeys(t *testing.T) {
	for in, want := range map[string]string{
		`{"index":{"blockSize":16}}`:                                   `index.blockSize: set once, by the top-level "blockSize"`,
		`{"blockSize":16,"index":{"blockSize":16}}`:                    `index.blockSize: set once, by the top-level "blockSize"`,
		`{"index":{"speculativeTTL":"5s"}}`:                            `index.speculativeTTL: set once, by the top-level "speculative.ttl"`,
		`{"model":"a","render":{"modelName":"a"}}`:                     `render.modelName: set once, by the top-level "model"`,
		`{"model":"a","events":{"model":"b"}}`:                         `events.model: set once, by the top-level "model"`,
		`{"speculative":{"ttl":"3s"},"index":{"speculativeTTL":"3s"}}`: `index.speculativeTTL`,
	} {
		_, err := LoadConfig(strings.NewReader(in))
		require.ErrorIs(t, err, ErrInvalidConfig, in)
		require.ErrorContains(t, err, want, in)
		var ce *jsonconf.Error
		require.True(t, errors.As(err, &ce), "%s: %v", in, err)
	}
	// Validate holds Go-built configurations to the same rule.
	for name, set := range map[string]func(*Config){
		"index.blockSize":      func(c *Config) { c.Index.BlockSize = 16 },
		"index.speculativeTTL": func(c *Config) { c.Index.SpeculativeTTL = time.Second },
		"render.modelName":     func(c *Config) { c.Render.ModelName = "m" },
		"events.model":         func(c *Config) { c.Events.PoolConfig.Model = "m" },
		"EventsConfig.Replay":  func(c *Config) { c.Events.PoolConfig.Replay = true },
	} {
		cfg := Config{Model: "m"}
		set(&cfg)
		require.ErrorContains(t, cfg.Validate(), name)
		_, err := New(context.Background(), cfg, Options{})
		require.ErrorIs(t, err, ErrInvalidConfig, name)
	}
	// What MarshalJSON writes, LoadConfig reads: the passed-down keys are left out.
	data, err := json.Marshal(DefaultConfig())
	require.NoError(t, err)
	for _, k := range []string{`"blockSize":0`, `"speculativeTTL"`, `"modelName"`, `"model":""`} {
		require.NotContains(t, strings.ReplaceAll(string(data), `"model":"",`, ""), k)
	}
}

// The zero Config means the defaults: New(ctx, Config{Model: m}) builds a
// Router that runs with the configuration DefaultConfig shows, and so does
// a configuration decoded over the zero Config from a document naming only
// the model. Explicit zeros and falses keep their own meaning.
func TestZeroConfigMeansTheDefaults(t *testing.T) {
	build := func(cfg Config) *Router {
		r, err := New(context.Background(), cfg, Options{})
		require.NoError(t, err)
		t.Cleanup(r.Close)
		return r
	}
	def := DefaultConfig()
	def.Model = "m"
	want := build(def).cfg
	require.Equal(t, def, want, "DefaultConfig is what New runs with")
	require.Equal(t, want, build(Config{Model: "m"}).cfg)
	var decoded Config
	require.NoError(t, json.Unmarshal([]byte(`{"model":"m"}`), &decoded))
	require.Equal(t, Config{Model: "m"}, decoded, "absent keys stay zero over a zero Config")
	require.Equal(t, want, build(decoded).cfg)

	cfg, err := LoadConfig(strings.NewReader(`{"model":"m","openRequestTokens":0,
		"speculative":{"enabled":false},"events":{"enabled":false,"replay":false,"topicFilter":""},
		"affinity":{"affinityThreshold":0,"maxTTFTPenalty":"0s"},
		"render":{"omitMMKwargs":false,"attemptTimeout":"0s"}}`))
	require.NoError(t, err)
	got := build(cfg).cfg
	require.Zero(t, *got.OpenRequestTokens, "0 disables the open-request load")
	require.False(t, *got.Speculative.Enabled)
	require.False(t, *got.Events.Enabled)
	require.False(t, *got.Events.Replay)
	require.Empty(t, *got.Events.TopicFilter, `"" subscribes to every topic`)
	require.Zero(t, *got.Affinity.AffinityThreshold)
	require.Zero(t, *got.Affinity.MaxTTFTPenalty)
	require.False(t, *got.Render.OmitMMKwargs)
	require.Zero(t, *got.Render.AttemptTimeout)
}

// LoadConfig validates what New would refuse: a negative bound of the
// request-ID table is an error from LoadConfig and Validate, not only
// from New.
func TestLoadConfigRejectsNegativeRequestBounds(t *testing.T) {
	for in, want := range map[string]string{
		`{"model":"m","requests":{"maxRequests":-1}}`: "requests.maxRequests -1 is negative",
		`{"model":"m","requests":{"ttl":"-1s"}}`:      "requests.ttl -1s is negative",
	} {
		_, err := LoadConfig(strings.NewReader(in))
		require.ErrorIs(t, err, ErrInvalidConfig, in)
		require.ErrorContains(t, err, want, in)
	}
	cfg := Config{Model: "m"}
	cfg.Requests.MaxRequests = -1
	require.ErrorContains(t, cfg.Validate(), "requests.maxRequests")
}

// LoadConfig refuses what the index would refuse when the Router builds it,
// naming the key under "index", and keeps zero values as the defaults.
func TestLoadConfigValidatesIndex(t *testing.T) {
	for in, want := range map[string]string{
		`{"index":{"maxBytes":-1}}`:                          "index.maxBytes must be >= 0",
		`{"index":{"maxBlocksPerEndpoint":-5}}`:              "index.maxBlocksPerEndpoint must be >= 0, got -5",
		`{"index":{"speculativeWeight":-0.5}}`:               "index.speculativeWeight must be finite and >= 0, got -0.5",
		`{"index":{"tierWeights":{"cpu":-0.1}}}`:             `index.tierWeights["cpu"] must be finite and >= 0, got -0.1`,
		`{"index":{"tierWeights":{"CPU":0.5}}}`:              `index.tierWeights key "CPU" must be lower-case and non-empty`,
		`{"index":{"tierWeights":{"":0.5}}}`:                 `index.tierWeights key "" must be lower-case and non-empty`,
		`{"index":{"maxBytes":0,"maxBlocksPerEndpoint":-1}}`: "index.maxBlocksPerEndpoint",
		`{"index":{}}`: "",
		`{"index":{"maxBytes":0,"maxBlocksPerEndpoint":0,"speculativeWeight":0,"sweepInterval":"0s"}}`: "",
		`{"index":{"sweepInterval":"-1ns","maxBytes":1073741824,"tierWeights":{"cpu":0,"disk":0.2}}}`:  "",
	} {
		cfg, err := LoadConfig(strings.NewReader(in))
		if want == "" {
			require.NoError(t, err, in)
			require.NoError(t, cfg.Validate(), in)
			continue
		}
		require.ErrorIs(t, err, ErrInvalidConfig, in)
		require.ErrorContains(t, err, want, in)
	}
	// Values JSON cannot carry, set in Go, are refused by Validate as New
	// would refuse them.
	for name, set := range map[string]func(*Config){
		"index.speculativeWeight":  func(c *Config) { c.Index.SpeculativeWeight = math.NaN() },
		`index.tierWeights["gpu"]`: func(c *Config) { c.Index.TierWeights = map[string]float64{"gpu": math.Inf(1)} },
		"index.maxBytes":           func(c *Config) { c.Index.MaxBytes = -1 << 20 },
	} {
		cfg := DefaultConfig()
		set(&cfg)
		err := cfg.Validate()
		require.ErrorIs(t, err, ErrInvalidConfig, name)
		require.ErrorContains(t, err, name, name)
	}
}
