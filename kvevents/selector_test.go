package kvevents

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/replay"
)

func TestParseSelector(t *testing.T) {
	labels := map[string]string{"role": "decode", "zone": "a", "app.kubernetes.io/name": "vllm", "empty": "", "gpus": "4"}
	for _, tc := range []struct {
		in    string
		match bool
		reqs  int
	}{
		{"", true, 0},
		{"   ", true, 0},
		{"role=decode", true, 1},
		{"role==decode", true, 1},
		{"role = decode", true, 1},
		{"role=prefill", false, 1},
		{"role!=prefill", true, 1},
		{"role!=decode", false, 1},
		{"missing!=x", true, 1},
		{"zone in (a,b)", true, 1},
		{"zone in ( b , c )", false, 1},
		{"missing in (a)", false, 1},
		{"zone notin (b,c)", true, 1},
		{"zone notin (a)", false, 1},
		{"missing notin (a)", true, 1},
		{"role", true, 1},
		{"missing", false, 1},
		{"!missing", true, 1},
		{"! role", false, 1},
		{"empty=", true, 1},
		{"empty", true, 1},
		{"app.kubernetes.io/name=vllm", true, 1},
		{"role=decode,zone in (a,b),!draining", true, 3},
		{"role=decode, zone notin (a), !draining", false, 3},
		{"role in (decode,prefill),zone", true, 2},
		{"empty in ()", true, 1},             // Kubernetes reads () as the set of the empty value
		{"zone notin ()", true, 1},           // zone is "a", not ""
		{"gpus>1,gpus<16", true, 2},          // integer comparisons, as in Kubernetes
		{"zone>1", false, 1},                 // "a" is not an integer
		{"in in (in), notin", false, 2},      // in and notin are keys and values where one is expected
		{"role=decode\x00,zone=a", true, 2},  // a NUL ends the token before it, as in Kubernetes' lexer
		{"role=decode \x00,zone=b", true, 1}, // and ends the selector where a token would start
	} {
		s, err := ParseSelector(tc.in)
		require.NoError(t, err, tc.in)
		require.Len(t, s.reqs, tc.reqs, tc.in)
		require.Equal(t, tc.match, s.Matches(labels), tc.in)
		require.Equal(t, tc.in, s.String())
	}
	for _, tc := range []struct{ in, msg string }{
		{",", "expected a requirement"},
		{"role=decode,", "expected a requirement after ','"},
		{"role=decode,,zone", "expected a requirement after ','"},
		{"role decode", "expected an operator"},
		{"role=dec ode", "expected ',' or end of selector"},
		{"role=a|b", "label value must be empty or letters"},
		{"zone in a,b", "expected '(' after in"},
		{"zone in (a,", "expected a value or ',' in the set"},
		{"zone in (a b)", "expected ',' or ')' in the set"},
		{"zone notin (a", "expected ',' or ')' in the set"},
		{"!", "expected a label key"},
		{"!=x", "expected a requirement"},
		{"=x", "expected a requirement"},
		{"!a=b", "expected ',' or end of selector"},
		{"gpus>x", "must be a decimal integer"},
		{"k€=v", "label key name must be"},
		{"-a", "label key name must be"},
		{"a/b/c", "more than one '/'"},
		{"Example.com/x", "prefix is not a lower-case DNS subdomain"},
		{strings.Repeat("k", 64), "name is longer than 63 bytes"},
		{"k=" + strings.Repeat("v", 64), "label value is longer than 63 bytes"},
	} {
		_, err := ParseSelector(tc.in)
		var se *SelectorError
		require.True(t, errors.As(err, &se), "%q: %v", tc.in, err)
		require.Contains(t, se.Msg, tc.msg, tc.in)
		require.Equal(t, tc.in, se.Input)
		require.True(t, strings.Contains(err.Error(), tc.in))
	}
}

func TestPoolConfigValidationAndJSON(t *testing.T) {
	ix := newPoolIndex(t)
	_, err := NewPool(PoolConfig{Selector: "zone in (a"}, ix, Options{})
	var se *SelectorError
	require.ErrorAs(t, err, &se, "an invalid selector is a constructor error")
	_, err = NewPool(PoolConfig{}, nil, Options{})
	require.Error(t, err)
	for _, bad := range []PoolConfig{
		{Concurrency: -1}, {QueueSize: -1}, {EventsPort: 70000}, {ReplayPort: -2},
		{MinBackoff: time.Second, MaxBackoff: time.Millisecond}, {HandshakeTimeout: -1},
		{BindAddress: "ipc:///tmp/kv"}, {BindAddress: "no-port"}, {ReplayClient: replay.ClientConfig{Timeout: -1}},
	} {
		require.Error(t, bad.Validate(), "%+v", bad)
	}

	cfg, err := LoadPoolConfig(strings.NewReader(`{"concurrency": 2, "selector": "role=decode",
		"replay": true, "idleTimeout": "30s", "replayClient": {"timeout": "1m"}}`))
	require.NoError(t, err)
	require.Equal(t, 2, cfg.Concurrency)
	require.Equal(t, 30*time.Second, cfg.IdleTimeout)
	require.Equal(t, time.Minute, cfg.ReplayClient.Timeout)
	_, err = LoadPoolConfig(strings.NewReader(`{"concurency": 2}`))
	require.ErrorContains(t, err, "concurency: unknown key")
	_, err = LoadPoolConfig(strings.NewReader(`{"replayClient": {"timeout": 60000000000}}`))
	require.ErrorContains(t, err, "replayClient.timeout: bare number 60000000000 is not a duration")
	_, err = LoadPoolConfig(strings.NewReader(`{"selector": "!"}`))
	require.ErrorAs(t, err, &se)

	d := PoolConfig{}.withDefaults()
	require.Equal(t, defaultConcurrency, d.Concurrency)
	require.Equal(t, defaultIdleTimeout, d.IdleTimeout)
	require.Equal(t, 100*time.Millisecond, d.MinBackoff)
	require.Equal(t, 2*time.Second, d.MaxBackoff)
	require.Zero(t, PoolConfig{IdleTimeout: -1}.withDefaults().IdleTimeout, "negative disables")

	ep, err := Endpoint{ID: "10.0.0.7:8000", Rank: 1}.resolve(&PoolConfig{EventsPort: 5556, ReplayPort: 5559, Replay: true})
	require.NoError(t, err)
	require.Equal(t, "tcp://10.0.0.7:5557", ep.EventsAddress, "rank offsets the port")
	require.Equal(t, "tcp://10.0.0.7:5560", ep.ReplayAddress)
	ep, err = Endpoint{ID: "[fd00::1]:8000"}.resolve(&PoolConfig{EventsPort: 5556})
	require.NoError(t, err)
	require.Equal(t, "tcp://[fd00::1]:5556", ep.EventsAddress)
	require.Empty(t, ep.ReplayAddress, "no replay unless enabled or given")
}
