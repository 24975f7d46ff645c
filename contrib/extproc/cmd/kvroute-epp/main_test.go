package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"sigs.k8s.io/yaml"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/contrib/extproc"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

const model = "kvroute/sim-epp"

// The binary end to end with a static endpoint list: it listens on its three
// ports, reports readiness, routes a request Envoy-style to a simulated engine,
// exports its metrics and shuts down cleanly on cancellation.
func TestRunServesExtProcHealthAndMetrics(t *testing.T) {
	defer leakcheck.Check(t)()
	engine, stopEngine := startSimEngine(t)
	defer stopEngine()

	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte("model: "+model+"\nblockSize: 16\nevents:\n  enabled: false\n"), 0o600))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, done := startEPP(t, ctx, "--endpoints", engine, "--config", cfgPath,
		"--checkpoint", filepath.Join(dir, "index.ckpt"))

	hconn, err := grpc.NewClient(m[2], grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer hconn.Close()
	require.Eventually(t, func() bool {
		resp, err := healthpb.NewHealthClient(hconn).Check(ctx, &healthpb.HealthCheckRequest{Service: extproc.ReadinessService})
		return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
	}, 20*time.Second, 10*time.Millisecond)

	envoy, client, stopEnvoy := startEnvoy(t, m[1])
	defer stopEnvoy()
	resp, err := client.Post(envoy+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"`+model+`","prompt":"hello from envoy","max_tokens":2}`))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, engine, resp.Header.Get(extproc.EndpointHeader))

	mresp, err := client.Get(m[3])
	require.NoError(t, err)
	metrics, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	require.Contains(t, string(metrics), `kvroute_extproc_requests_total{result="routed"} 1`)
	require.Contains(t, string(metrics), "llm_d_epp_token_producer_render_duration_seconds")

	cancel()
	waitRun(t, done)
	_, err = os.Stat(filepath.Join(dir, "index.ckpt"))
	require.NoError(t, err, "the index checkpoint is written on shutdown")
}

func TestFlagsNeedExactlyOneEndpointSource(t *testing.T) {
	_, err := parseFlags([]string{}, io.Discard)
	require.Error(t, err)
	_, err = parseFlags([]string{"--pool-name", "p", "--endpoints", "1.2.3.4:8000"}, io.Discard)
	require.Error(t, err)
	f, err := parseFlags([]string{"--pool-name", "p"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 9002, f.grpcPort)
	require.Equal(t, 9003, f.healthPort)
	require.Equal(t, 9090, f.metricsPort)
}

// A static endpoint list is checked as the gateway's --endpoints is: an ID
// given twice would be two candidates of one engine (picked and named as
// its own fallback, its share of ties doubled), and a list of separators
// alone would start a picker that can never be ready.
func TestFlagsRefuseABadStaticEndpointList(t *testing.T) {
	for _, list := range []string{"10.0.0.1:8000,10.0.0.1:8000", ",", " , ", "10.0.0.1", "10.0.0.1:0"} {
		_, err := parseFlags([]string{"--endpoints", list}, io.Discard)
		require.ErrorContains(t, err, "--endpoints", "%q", list)
	}
	f, err := parseFlags([]string{"--endpoints", " 10.0.0.1:8000, ,10.0.0.2:8000"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []kvroute.Endpoint{{ID: "10.0.0.1:8000"}, {ID: "10.0.0.2:8000"}}, f.staticEndpoints)
}

// A stray argument is refused: flag parsing stops at it, so the flags after
// it (here --fallbacks) were silently ignored.
func TestFlagsRefuseStrayArguments(t *testing.T) {
	_, err := parseFlags([]string{"--endpoints", "127.0.0.1:8000", "stray", "--fallbacks", "2"}, io.Discard)
	require.ErrorContains(t, err, `unexpected arguments ["stray" "--fallbacks" "2"]`)
}

func TestLoadConfigReadsYAMLStrictly(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	require.NoError(t, os.WriteFile(good, []byte("model: m\nblockSize: 32\n"), 0o600))
	cfg, err := loadConfig(good, "", false, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Equal(t, "m", cfg.Model)
	require.Equal(t, 32, cfg.BlockSize)
	cfg, err = loadConfig(good, "override", false, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Equal(t, "override", cfg.Model)

	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("model: m\nnoSuchKey: 1\n"), 0o600))
	_, err = loadConfig(bad, "", false, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "noSuchKey")
}

// An llm-d EndpointPickerConfig's plugin parameters, pasted under their
// plugin type names next to kvroute's keys, load as they are; a setting
// given both ways is an error.
func TestLoadConfigAcceptsLLMDPluginParameters(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "llmd.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`model: m
precise-prefix-cache-producer:
  tokenProcessorConfig: {blockSizeTokens: 16}
  kvEventsConfig:
    podDiscoveryConfig: {socketPort: 5556, replaySocketPort: 5557}
prefix-cache-affinity-filter:
  maxTTFTPenaltyMs: 12000
token-load-scorer:
  queueThresholdTokens: 1048576
`), 0o600))
	cfg, err := loadConfig(path, "", false, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Equal(t, 16, cfg.BlockSize)
	require.Equal(t, 5557, cfg.Events.ReplayPort)
	require.Equal(t, 12*time.Second, *cfg.Affinity.MaxTTFTPenalty)
	require.EqualValues(t, 1048576, cfg.QueueThresholdTokens)

	both := filepath.Join(dir, "both.yaml")
	require.NoError(t, os.WriteFile(both, []byte("blockSize: 64\nprecise-prefix-cache-producer:\n  tokenProcessorConfig: {blockSizeTokens: 16}\n"), 0o600))
	_, err = loadConfig(both, "", false, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "set the same setting")
}

// guidePickerConfig writes the EndpointPickerConfig of llm-d's precise
// prefix-cache routing guide (kept as a fixture of package llmd) to a file,
// as the guide's chart mounts it for the picker, and returns its path.
func guidePickerConfig(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../../../llmd/testdata/guide/precise-prefix-cache-routing.values.yaml")
	require.NoError(t, err)
	var values struct {
		Router struct {
			EPP struct {
				PluginsConfigFile   string            `json:"pluginsConfigFile"`
				PluginsCustomConfig map[string]string `json:"pluginsCustomConfig"`
			} `json:"epp"`
		} `json:"router"`
	}
	require.NoError(t, yaml.Unmarshal(data, &values))
	epc := values.Router.EPP.PluginsCustomConfig[values.Router.EPP.PluginsConfigFile]
	require.Contains(t, epc, "kind: EndpointPickerConfig")
	path := filepath.Join(t.TempDir(), values.Router.EPP.PluginsConfigFile)
	require.NoError(t, os.WriteFile(path, []byte(epc), 0o600))
	return path
}

// The guide's whole EndpointPickerConfig is a --config file: the settings
// kvroute implements are translated, and each one it does not carry over is
// logged on a line of its own; --strict-config refuses it, naming them all.
func TestConfigAcceptsAWholeEndpointPickerConfig(t *testing.T) {
	path := guidePickerConfig(t)
	f, err := parseFlags([]string{"--endpoints", "10.0.0.1:8000", "--config", path}, io.Discard)
	require.NoError(t, err)
	require.False(t, f.strictConfig)
	var logs bytes.Buffer
	cfg, err := loadConfig(f.configPath, f.model, f.strictConfig, slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)
	require.Equal(t, "Qwen/Qwen3-32B", cfg.Model)
	require.Equal(t, "http://precise-prefix-cache-routing-render:8000", cfg.Render.URL)
	require.Equal(t, 64, cfg.BlockSize)
	require.Equal(t, 8, cfg.Events.Concurrency)
	require.Equal(t, 5556, cfg.Events.EventsPort)
	require.Equal(t, 15926.0, cfg.Affinity.PeakPrefillThroughput)
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	require.Len(t, lines, 4, logs.String())
	for i, key := range []string{"plugins[endpoint-notification-source]", "plugins[precise-prefix-cache-producer].parameters.indexerConfig.kvBlockIndexConfig", "plugins[prefix-cache-affinity-filter]", "dataLayer"} {
		require.Contains(t, lines[i], "level=WARN")
		require.Contains(t, lines[i], "key="+key+" ")
	}

	err = run(context.Background(), []string{"--endpoints", "10.0.0.1:8000", "--config", path, "--strict-config"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "strict: 4 llm-d settings are not carried over")
	require.ErrorContains(t, err, "plugins[endpoint-notification-source]: ignored: not needed")
}

// --fallbacks is bounded; --conformance-test-hooks is off unless given.
func TestFallbacksAndConformanceHooksFlags(t *testing.T) {
	f, err := parseFlags([]string{"--endpoints", "127.0.0.1:8000"}, io.Discard)
	require.NoError(t, err)
	require.Zero(t, f.fallbacks)
	require.False(t, f.conformanceTestHooks)
	require.False(t, f.observeCachedTokens)
	require.False(t, f.allowClientKVTransferParams)
	f, err = parseFlags([]string{"--endpoints", "127.0.0.1:8000", "--fallbacks", "2", "--conformance-test-hooks", "--observe-cached-tokens", "--allow-client-kv-transfer-params"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 2, f.fallbacks)
	require.True(t, f.conformanceTestHooks)
	require.True(t, f.observeCachedTokens)
	require.True(t, f.allowClientKVTransferParams)

	defer leakcheck.Check(t)()
	err = tryRun("--fallbacks", "17")
	require.ErrorContains(t, err, "fallbacks 17")
}

// --max-body-bytes-in-flight reaches the picker's Config: 0 (its default)
// is the picker's default, a negative value or one below --max-body-bytes
// is refused.
func TestMaxBodyBytesInFlightFlag(t *testing.T) {
	f, err := parseFlags([]string{"--endpoints", "127.0.0.1:8000"}, io.Discard)
	require.NoError(t, err)
	require.Zero(t, f.maxBodyBytesInFlight)
	f, err = parseFlags([]string{"--endpoints", "127.0.0.1:8000", "--max-body-bytes-in-flight", "1048576"}, io.Discard)
	require.NoError(t, err)
	require.EqualValues(t, 1<<20, f.maxBodyBytesInFlight)

	defer leakcheck.Check(t)()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-body-bytes-in-flight", "-1"}, "maxBodyBytesInFlight -1 is negative"},
		{[]string{"--max-body-bytes", "2048", "--max-body-bytes-in-flight", "1024"}, "maxBodyBytesInFlight 1024 is below maxBodyBytes 2048"},
	} {
		err = tryRun(c.args...)
		require.ErrorContains(t, err, c.want)
	}
}

// --pool-group names one of the two InferencePool API groups kvroute reads;
// any other (a typo, the group with its version) is refused at start
// rather than read as the v1 group.
func TestPoolGroupFlag(t *testing.T) {
	for group, version := range map[string]string{"inference.networking.k8s.io": "v1", "inference.networking.x-k8s.io": "v1alpha2"} {
		f, err := parseFlags([]string{"--pool-name", "p", "--pool-group", group}, io.Discard)
		require.NoError(t, err)
		cfg, ok := poolDiscovery(f)
		require.True(t, ok)
		require.Equal(t, version, cfg.PoolVersion)
	}
	for _, group := range []string{"inference.networking.x-k8s.io/v1alpha2", "inference.networking.k8s", "apps", ""} {
		_, err := parseFlags([]string{"--pool-name", "p", "--pool-group", group}, io.Discard)
		require.ErrorContains(t, err, "--pool-group", group)
	}
}

// --render-port is a port: one out of range is refused at start, not
// narrowed to another port (1<<32 + 8000 became 8000).
func TestRenderPortFlag(t *testing.T) {
	for _, port := range []string{"0", "65536", "-1", "4294975296"} {
		_, err := parseFlags([]string{"--pool-name", "p", "--render-selector", "app=render", "--render-port", port}, io.Discard)
		require.ErrorContains(t, err, "--render-port", port)
	}
	f, err := parseFlags([]string{"--pool-name", "p", "--render-selector", "app=render", "--render-port", "8100"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 8100, f.renderPort)
}
