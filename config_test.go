package kvroute

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	require.Equal(t, 18*time.Second, cfg.Affinity.MaxTTFTPenalty)
	require.Equal(t, 500*time.Millisecond, cfg.Index.SweepInterval)
	require.Equal(t, 2*time.Second, cfg.Render.AttemptTimeout)
	require.Equal(t, time.Minute, cfg.Events.IdleTimeout)
	require.Equal(t, 2*time.Minute, cfg.Events.ReplayClient.Timeout)
	require.True(t, cfg.Events.Enabled, "events.enabled keeps its default")
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

func TestLoadConfigRejectsSettingsThatDoNothing(t *testing.T) {
	for in, want := range map[string]string{
		`{"index":{"blockSize":16}}`:                "index.blockSize 16 conflicts with blockSize 64",
		`{"blockSize":16,"index":{"blockSize":64}}`: "index.blockSize 64 conflicts with blockSize 16",
		`{"index":{"speculativeTTL":"5s"}}`:         "index.speculativeTTL 5s conflicts with speculative.ttl 2s",
		`{"model":"a","render":{"modelName":"b"}}`:  `render.modelName "b" conflicts with model "a"`,
		`{"render":{"modelName":"b"}}`:              `render.modelName "b" conflicts with model ""`,
		`{"model":"a","events":{"model":"b"}}`:      `events.model "b" conflicts with model "a"`,
	} {
		_, err := LoadConfig(strings.NewReader(in))
		require.ErrorIs(t, err, ErrInvalidConfig, in)
		require.ErrorContains(t, err, want, in)
	}
	// The same value in both places is harmless and accepted.
	for _, in := range []string{
		`{"blockSize":16,"index":{"blockSize":16}}`,
		`{"speculative":{"ttl":"3s"},"index":{"speculativeTTL":"3s"}}`,
		`{"model":"m","render":{"modelName":"m"},"events":{"model":"m"}}`,
	} {
		_, err := LoadConfig(strings.NewReader(in))
		require.NoError(t, err, in)
	}
	// Validate holds Go-built configurations to the same rule.
	cfg := DefaultConfig()
	cfg.Index.BlockSize = 16
	require.ErrorContains(t, cfg.Validate(), "index.blockSize")
	_, err := New(context.Background(), cfg, Options{})
	require.ErrorIs(t, err, ErrInvalidConfig)
}
