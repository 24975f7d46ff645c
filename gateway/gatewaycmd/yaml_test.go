package gatewaycmd

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/kvroute/kvroute"
)

func TestConfigFileInYAML(t *testing.T) {
	cfg := writeFile(t, "router.yaml", `
model: Qwen/Qwen3-32B
blockSize: 16
speculative:
  ttl: 3s
affinity:
  maxTTFTPenalty: 12s
events:
  idleTimeout: 90s
  replayClient:
    timeout: 1m
`)
	eps := writeFile(t, "eps.yaml", "- id: 10.0.0.1:8000\n  labels: {zone: a}\n")
	o, err := parseFlags([]string{"--config", cfg, "--endpoints-file", eps}, io.Discard, io.Discard)
	require.NoError(t, err)
	r := o.server.Router
	require.Equal(t, "Qwen/Qwen3-32B", r.Model)
	require.Equal(t, 16, r.BlockSize)
	require.Equal(t, 3*time.Second, r.Speculative.TTL)
	require.Equal(t, 12*time.Second, *r.Affinity.MaxTTFTPenalty)
	require.Equal(t, 90*time.Second, r.Events.IdleTimeout)
	require.Equal(t, time.Minute, r.Events.ReplayClient.Timeout)
	require.Equal(t, map[string]string{"zone": "a"}, o.server.Endpoints[0].Labels)
}

func TestConfigFileInYAMLKeepsTheStrictRules(t *testing.T) {
	eps := writeFile(t, "eps.yaml", "- id: 10.0.0.1:8000\n")
	for content, want := range map[string]string{
		"speculative:\n  ttl: 2000\n":          "speculative.ttl: bare number 2000 is not a duration",
		"affinity:\n  maxTTFTPenalty: 18000\n": "affinity.maxTTFTPenalty: bare number 18000",
		"speculative:\n  tll: 2s\n":            "speculative.tll: unknown key",
		"index:\n  blockSize: 16\n":            `index.blockSize: set once, by the top-level "blockSize"`,
		"blockSize: 64\nprecise-prefix-cache-producer:\n  tokenProcessorConfig: {blockSizeTokens: 16}\n": "set the same setting",
		"model: [unclosed\n":   "yaml",
		"model: a\nmodel: b\n": `key "model" already set`,
	} {
		_, err := parseFlags([]string{"--config", writeFile(t, "c.yaml", content), "--endpoints-file", eps}, io.Discard, io.Discard)
		require.ErrorContains(t, err, want, content)
	}
}

// An llm-d EndpointPickerConfig's plugin parameters, pasted under their
// plugin type names, load as they are.
func TestConfigFileWithLLMDBlocksInYAML(t *testing.T) {
	cfg := writeFile(t, "router.yaml", `
model: Qwen/Qwen3-32B
precise-prefix-cache-producer:
  tokenProcessorConfig:
    blockSizeTokens: 64
  kvEventsConfig:
    topicFilter: "kv@"
    concurrency: 4
    discoverPods: true
    podDiscoveryConfig:
      socketPort: 5556
      replaySocketPort: 5557
  speculativeIndexing: true
  speculativeTTL: 2s
prefix-cache-affinity-filter:
  affinityThreshold: 0.80
  explorationProbability: 0
  maxTTFTPenaltyMs: 18000
  peakPrefillThroughput: 15928
  prefixMatchInfoProducerName: precise-prefix-cache-producer
token-load-scorer:
  queueThresholdTokens: 4194304
`)
	o, err := parseFlags([]string{"--config", cfg, "--endpoints", "10.0.0.1:8000"}, io.Discard, io.Discard)
	require.NoError(t, err)
	r := o.server.Router
	require.Equal(t, 5557, r.Events.ReplayPort)
	require.Equal(t, 18*time.Second, *r.Affinity.MaxTTFTPenalty)
	require.Equal(t, 2*time.Second, r.Speculative.TTL)
	require.Equal(t, 64, r.BlockSize)
}

func TestDefaultConfigRoundTripsThroughYAML(t *testing.T) {
	def := kvroute.DefaultConfig()
	out, err := yaml.Marshal(def)
	require.NoError(t, err)
	require.Contains(t, string(out), "ttl: 2s")
	require.Contains(t, string(out), "maxTTFTPenalty: 18s")
	back, _, findings, err := loadConfigFile(writeFile(t, "default.yaml", string(out)), true)
	require.NoError(t, err)
	require.Empty(t, findings)
	require.Equal(t, def, back)

	// And straight through sigs.k8s.io/yaml's Unmarshal, which decodes via
	// Config.UnmarshalJSON.
	var direct kvroute.Config
	require.NoError(t, yaml.Unmarshal(out, &direct))
	require.Equal(t, def, direct)
	require.ErrorContains(t, yaml.Unmarshal([]byte("speculative: {ttl: 2000}"), &direct), "bare number")
}

// A --config or --endpoints-file holding more than one YAML document (or
// JSON value) is refused: only the first was read, so the settings and
// endpoints after a "---" were dropped without a word, unknown keys there
// included. A trailing "---" with nothing after it is one document.
func TestFileWithSeveralDocumentsIsRefused(t *testing.T) {
	eps := writeFile(t, "eps.yaml", "- id: 10.0.0.1:8000\n")
	for _, content := range []string{
		"model: m\n---\ngateway:\n  maxBodyBytes: 1024\n",
		"model: m\n---\nbogus: 1\n",
		"{\"model\":\"m\"}\n{\"blockSize\":16}\n",
		"model: m\n---\nblockSize: [unclosed\n",
	} {
		_, err := parseFlags([]string{"--config", writeFile(t, "c.yaml", content), "--endpoints-file", eps}, io.Discard, io.Discard)
		require.ErrorContains(t, err, "c.yaml", content)
	}
	_, err := parseFlags([]string{"--config", writeFile(t, "c.yaml", "model: m\n---\ngateway:\n  maxBodyBytes: 1024\n"), "--endpoints-file", eps}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "more than one document")
	_, err = parseFlags([]string{"--model", "m", "--endpoints-file", writeFile(t, "e.yaml", "- id: 10.0.0.1:8000\n---\n- id: 10.0.0.2:8000\n")}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "more than one document", "an endpoint after a \"---\" is not dropped")

	o, err := parseFlags([]string{"--config", writeFile(t, "c.yaml", "---\nmodel: m\nblockSize: 16\n---\n"), "--endpoints-file", eps}, io.Discard, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 16, o.server.Router.BlockSize)
}
