package llmd_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/llmd"
	"github.com/kvroute/kvroute/session"
)

// guideValues returns the EndpointPickerConfig a values file of llm-d's
// guides gives the picker: the pluginsCustomConfig entry that
// pluginsConfigFile names, under the chart's section (router.epp in the
// current router chart, inferenceExtension in the earlier one).
func guideValues(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	type epp struct {
		PluginsConfigFile   string            `json:"pluginsConfigFile"`
		PluginsCustomConfig map[string]string `json:"pluginsCustomConfig"`
	}
	var values struct {
		Router struct {
			EPP *epp `json:"epp"`
		} `json:"router"`
		InferenceExtension *epp `json:"inferenceExtension"`
	}
	require.NoError(t, yaml.Unmarshal(data, &values))
	e := values.Router.EPP
	if e == nil {
		e = values.InferenceExtension
	}
	require.NotNil(t, e, file)
	doc, ok := e.PluginsCustomConfig[e.PluginsConfigFile]
	require.True(t, ok, file)
	return doc
}

// want is a Finding without its note, which the tests check is present.
type want struct {
	path string
	kind llmd.Kind
}

func requireFindings(t *testing.T, got []llmd.Finding, wants ...want) {
	t.Helper()
	var paths []want
	for _, f := range got {
		paths = append(paths, want{f.Path, f.Kind})
		if f.Kind != llmd.NoEquivalent {
			require.NotEmpty(t, f.Note, f.Path)
		}
	}
	require.Equal(t, wants, paths)
}

// loadBoth loads doc in both modes: the default returns the Config and the
// findings; strict fails exactly when there are findings, naming them all
// (and reads the same Config when there are none).
func loadBoth(t *testing.T, doc string) (kvroute.Config, []llmd.Finding) {
	t.Helper()
	cfg, findings, err := llmd.Load(strings.NewReader(doc), llmd.Options{})
	require.NoError(t, err)
	strict, _, err := llmd.Load(strings.NewReader(doc), llmd.Options{Strict: true})
	if len(findings) == 0 {
		require.NoError(t, err)
		require.Equal(t, cfg, strict)
		return cfg, findings
	}
	require.ErrorIs(t, err, kvroute.ErrInvalidConfig)
	require.ErrorContains(t, err, "strict: ")
	for _, f := range findings {
		require.ErrorContains(t, err, "\n\t"+f.String())
	}
	return cfg, findings
}

// The current guide (precise prefix-cache routing): the token producer, the
// precise producer, the in-flight load producer, the affinity filter and the
// token-load scorer are translated; what kvroute does on its own is reported.
func TestGuidePrecisePrefixCacheRouting(t *testing.T) {
	doc := guideValues(t, "testdata/guide/precise-prefix-cache-routing.values.yaml")
	cfg, findings := loadBoth(t, doc)
	exp := kvroute.DefaultConfig()
	exp.Model = "Qwen/Qwen3-32B"
	exp.Render.URL = "http://precise-prefix-cache-routing-render:8000"
	exp.BlockSize = 64
	exp.Speculative.Enabled = new(true)
	exp.Events.TopicFilter = new("kv@")
	exp.Events.Concurrency = 8
	exp.Events.EventsPort = 5556
	exp.Events.Replay = new(false) // no replaySocketPort: off, as in llm-d
	exp.Affinity.PeakPrefillThroughput = 15926
	require.Equal(t, exp, cfg)
	requireFindings(t, findings,
		want{"plugins[endpoint-notification-source]", llmd.NotNeeded},
		want{"plugins[precise-prefix-cache-producer].parameters.indexerConfig.kvBlockIndexConfig", llmd.Different},
		crowding,
		want{"dataLayer", llmd.NotNeeded},
	)

	// The same document as JSON reads the same.
	js, err := yaml.YAMLToJSON([]byte(doc))
	require.NoError(t, err)
	fromJSON, again, err := llmd.Load(strings.NewReader(string(js)), llmd.Options{})
	require.NoError(t, err)
	require.Equal(t, cfg, fromJSON)
	require.Equal(t, findings, again)
}

// The earlier guide (precise prefix-cache aware): one bound socket, the
// deprecated scorer, the UDS tokenizer and a hashSeed. The hashSeed is a
// finding, not an error: kvroute's block keys have no seed and engine
// hashes are mapped, so no seed of the engines changes them.
func TestGuidePrecisePrefixCacheAware(t *testing.T) {
	doc := guideValues(t, "testdata/guide/precise-prefix-cache-aware.values.yaml")
	cfg, findings := loadBoth(t, doc)
	exp := kvroute.DefaultConfig()
	exp.Model = "Qwen/Qwen3-32B"
	exp.BlockSize = 64
	exp.Events.TopicFilter = new("kv@")
	exp.Events.Concurrency = 4
	exp.Events.BindAddress = "tcp://*:5557"
	// llm-d's defaults where the document is silent and kvroute's differ:
	// no replay and no speculative indexing unless asked for.
	exp.Events.EventsPort = 5557
	exp.Events.Replay = new(false)
	exp.Speculative.Enabled = new(false)
	require.Equal(t, exp, cfg)
	const scorer = "plugins[precise-prefix-cache-scorer].parameters."
	requireFindings(t, findings,
		want{"plugins[tokenizer].parameters.udsTokenizerConfig", llmd.Different},
		want{"plugins[single-profile-handler]", llmd.NotNeeded},
		want{"plugins[decode-filter]", llmd.Different},
		want{scorer + "tokenProcessorConfig.hashSeed", llmd.NotNeeded},
		want{scorer + "indexerConfig.kvBlockIndexConfig", llmd.Different},
		want{scorer + "indexerConfig.tokenizersPoolConfig", llmd.Different},
		want{"plugins[kv-cache-utilization-scorer]", llmd.Different},
		want{"plugins[queue-scorer]", llmd.Different},
		want{"plugins[max-score-picker]", llmd.NotNeeded},
		want{"schedulingProfiles[default].plugins[precise-prefix-cache-scorer]", llmd.Different},
		want{"schedulingProfiles[default].plugins", llmd.Different},
		want{"schedulingProfiles[default].plugins", llmd.Different},
	)
	require.Contains(t, findings[3].Note, "PYTHONHASHSEED")
	require.Contains(t, findings[3].String(), "hashSeed: ignored: not needed (kvroute keys blocks from their token IDs")
}

// A complete EndpointPickerConfig: every top-level key of llm-d's config
// API and every parameter of the plugins kvroute translates.
func TestCompleteEndpointPickerConfig(t *testing.T) {
	data, err := os.ReadFile("testdata/endpointpickerconfig.yaml")
	require.NoError(t, err)
	cfg, findings := loadBoth(t, string(data))
	exp := kvroute.DefaultConfig()
	exp.Model = "Qwen/Qwen3-32B"
	exp.Render.URL = "http://render.llm.svc:8000"
	exp.Render.Timeout = 4 * time.Second
	exp.Render.MMTimeout = 20 * time.Second
	exp.BlockSize = 32
	exp.Events.TopicFilter = new("kv@")
	exp.Events.Concurrency = 6
	exp.Events.Engine = kvevents.EngineVLLM
	exp.Events.EventsPort = 5556
	exp.Events.Replay = new(true)
	exp.Events.ReplayPort = 5559
	exp.Speculative = kvroute.SpeculativeConfig{Enabled: new(true), TTL: 3 * time.Second}
	exp.Affinity.AffinityThreshold = new(0.75)
	exp.Affinity.ExplorationProbability = 0.02
	exp.Affinity.MaxTTFTPenalty = new(12 * time.Second)
	exp.Affinity.PeakPrefillThroughput = 20000
	exp.QueueThresholdTokens = 2097152
	exp.LoadWeight = 2
	require.Equal(t, exp, cfg)
	const precise = "plugins[precise].parameters."
	requireFindings(t, findings,
		want{"plugins[endpoint-notification-source]", llmd.NotNeeded},
		want{precise + "tokenProcessorConfig.hashSeed", llmd.NotNeeded},
		want{precise + "tokenProcessorConfig.hashAlgorithm", llmd.NotNeeded},
		want{precise + "indexerConfig.kvBlockIndexConfig", llmd.Different},
		want{precise + "indexerConfig.kvCacheBackendConfigs", llmd.Different},
		want{precise + "kvEventsConfig.podDiscoveryConfig.podLabelSelector", llmd.NotNeeded},
		want{precise + "kvEventsConfig.podDiscoveryConfig.podNamespace", llmd.Different},
		want{"plugins[load].parameters.addEstimatedOutputTokens", llmd.Different},
		want{"plugins[load].parameters.outputRatio", llmd.Different},
		want{"plugins[affinity]", llmd.Different},
		want{"plugins[session-affinity-scorer].parameters.strategy", llmd.Different},
		want{"plugins[session-affinity-scorer]", llmd.Different},
		want{"plugins[utilization-detector]", llmd.Different},
		want{"plugins[max-score-picker]", llmd.NotNeeded},
		want{"plugins[openai-parser]", llmd.Different},
		want{"featureGates[flowControl]", llmd.Different},
		want{"flowControl.maxRequests", llmd.Different},
		want{"saturationDetector", llmd.Different},
		want{"dataLayer", llmd.NotNeeded},
		want{"parser", llmd.Different},
		want{"plugins[session-affinity-scorer]", llmd.Different},
		want{"featureGates[flowControl]", llmd.Different},
	)
	for _, f := range findings {
		require.NotContains(t, f.Note, "not yet in kvroute", f.Path)
	}

	// The session-affinity-scorer and the flowControl gate are the stages
	// kvroute runs beside the router.
	res, err := llmd.LoadResult(strings.NewReader(string(data)), llmd.Options{})
	require.NoError(t, err)
	require.Equal(t, cfg, res.Config)
	require.Equal(t, findings[:len(findings)-2], res.Findings)
	require.Nil(t, res.Disagg)
	require.Equal(t, &session.Config{Headers: []string{"x-session-token"}, Weight: 1}, res.Session)
	require.Equal(t, &admission.Config{QueueTimeout: 30 * time.Second}, res.Admission)

	// The translated configuration marshals in kvroute's own keys and reads
	// back through kvroute.LoadConfig.
	out, err := json.Marshal(cfg)
	require.NoError(t, err)
	back, err := kvroute.LoadConfig(strings.NewReader(string(out)))
	require.NoError(t, err)
	require.Equal(t, cfg, back)
}

// epc returns an EndpointPickerConfig document of the given plugins and
// profiles (YAML flow lists).
func epc(plugins, profiles string) string {
	doc := "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins: " + plugins + "\n"
	if profiles != "" {
		doc += "schedulingProfiles: " + profiles + "\n"
	}
	return doc
}

// What llm-d's own loader refuses, and keys neither llm-d nor kvroute has,
// are errors naming their path; they are not findings.
func TestPickerConfigErrors(t *testing.T) {
	for doc, msg := range map[string]string{
		"apiVersion: v1\nkind: EndpointPickerConfig\nplugins: []\n":                                                             `apiVersion "v1": kvroute reads an EndpointPickerConfig of`,
		"apiVersion: llm-d.ai/v1alpha1\nkind: Pod\nplugins: []\n":                                                               `kind "Pod": kvroute reads an llm-d EndpointPickerConfig`,
		"apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nmodel: m\n":                                                 "model: unknown key",
		epc("[{type: precise-prefix-cache-producer, parameters: {indexerConfg: {}}}]", ""):                                      "plugins[precise-prefix-cache-producer].parameters.indexerConfg: unknown key",
		epc("[{type: precise-prefix-cache-producer, parameters: {kvEventsConfig: {podDiscoveryConfig: {socketPort: x}}}}]", ""): "plugins[precise-prefix-cache-producer].parameters.kvEventsConfig.podDiscoveryConfig.socketPort: want a number",
		epc("[{name: p, type: precise-prefix-cache-producer, parameters: {speculativeTTL: 2000}}]", ""):                         "plugins[p].parameters.speculativeTTL: bare number 2000",
		epc("[{type: token-load-scorer}]", "[{name: default, plugins: [{pluginRef: nope}]}]"):                                   `schedulingProfiles[default].plugins[0].pluginRef "nope": no plugin of that name`,
		epc("[{type: queue-scorer}, {type: queue-scorer}]", ""):                                                                 `plugins[1]: a second plugin named "queue-scorer"`,
		epc("[{type: precise-prefix-cache-producer}, {name: p2, type: precise-prefix-cache-producer}]", ""):                     "plugins[p2] and plugins[precise-prefix-cache-producer] are both precise-prefix-cache-producer plugins",
		epc("[{name: x}]", ""): "plugins[0].type: missing",
		epc("[{type: token-producer, parameters: {modelName: a}}, {type: tokenizer}]", ""):        "both token-producer plugins",
		epc("[{type: prefix-cache-affinity-filter, parameters: {affinityThreshold: 2}}]", ""):     "affinityThreshold must be in [0, 1]",
		"apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nkind: EndpointPickerConfig\n": "already set",
	} {
		_, _, err := llmd.Load(strings.NewReader(doc), llmd.Options{})
		require.ErrorIs(t, err, kvroute.ErrInvalidConfig, doc)
		require.ErrorContains(t, err, msg, doc)
	}
}

// Findings that depend on values and on the plugins' wiring.
func TestPickerConfigFindings(t *testing.T) {
	// llm-d's defaults: without schedulingProfiles, one profile of every
	// plugin (no finding for the filter and scorer kvroute always runs);
	// a scorer's weight defaults to 1.
	cfg, findings := loadBoth(t, epc("[{type: precise-prefix-cache-producer}, {type: prefix-cache-affinity-filter}, {type: token-load-scorer}]", ""))
	requireFindings(t, findings, crowding)
	require.Equal(t, 1.0, cfg.LoadWeight)

	// A precise producer without parameters runs in llm-d with llm-d's
	// defaults, so its engines are set up for them: 16-token blocks, events
	// on port 5557, no replay, no speculative indexing.
	require.Equal(t, 16, cfg.BlockSize)
	require.Equal(t, 5557, cfg.Events.EventsPort)
	require.False(t, *cfg.Events.Replay)
	require.False(t, *cfg.Speculative.Enabled)
	require.True(t, *cfg.Events.Enabled)

	// Without a precise producer kvroute keeps its index anyway: a finding.
	cfg, findings = loadBoth(t, epc("[{type: prefix-cache-affinity-filter}, {type: token-load-scorer}]", ""))
	requireFindings(t, findings, crowding, want{"plugins", llmd.Different})
	require.Equal(t, kvroute.DefaultConfig(), cfg)

	// A zero weight mutes llm-d's scorer; kvroute's scores anyway.
	cfg, findings = loadBoth(t, epc("[{type: token-load-scorer}]", "[{name: d, plugins: [{pluginRef: token-load-scorer, weight: 0}]}]"))
	require.Equal(t, 1.0, cfg.LoadWeight)
	requireFindings(t, findings,
		want{"schedulingProfiles[d].plugins[token-load-scorer].weight", llmd.Different},
		want{"schedulingProfiles[d].plugins", llmd.Different},
		want{"plugins", llmd.Different},
	)
	_, _, err := llmd.Load(strings.NewReader(epc("[{type: token-load-scorer}]", "[{name: d, plugins: [{pluginRef: token-load-scorer, weight: -1}]}]")), llmd.Options{})
	require.ErrorContains(t, err, "schedulingProfiles[d].plugins[token-load-scorer].weight -1 is negative")

	// Names that wire the filter, scorer and load producer to plugins other
	// than the precise producer and the in-flight load producer.
	_, findings = loadBoth(t, epc(`[{type: approx-prefix-cache-producer},
		{type: prefix-cache-affinity-filter, parameters: {prefixMatchInfoProducerName: approx-prefix-cache-producer, inFlightLoadProducerName: ghost, ttftSource: latencyPredictor, latencyPredictionInfoProducerName: p}},
		{type: token-load-scorer, parameters: {inFlightLoadProducerName: approx-prefix-cache-producer}},
		{type: token-producer, parameters: {modelName: m, vllm: {timeout: 3s}}}]`,
		`[{name: decode, plugins: [{pluginRef: prefix-cache-affinity-filter, weight: 3}, {pluginRef: token-load-scorer}]},
		  {name: prefill, plugins: [{pluginRef: token-load-scorer, weight: 5}], fallbackProfile: decode}]`))
	requireFindings(t, findings,
		want{"plugins[approx-prefix-cache-producer]", llmd.Different},
		want{"plugins[prefix-cache-affinity-filter].parameters.prefixMatchInfoProducerName", llmd.Different},
		want{"plugins[prefix-cache-affinity-filter].parameters.inFlightLoadProducerName", llmd.Different},
		want{"plugins[prefix-cache-affinity-filter].parameters.latencyPredictionInfoProducerName", llmd.NoEquivalent},
		want{"plugins[prefix-cache-affinity-filter].parameters.ttftSource", llmd.NoEquivalent},
		crowding,
		want{"plugins[token-load-scorer].parameters.inFlightLoadProducerName", llmd.Different},
		want{"plugins[token-producer].parameters.vllm.url", llmd.Different},
		want{"schedulingProfiles[decode].plugins[prefix-cache-affinity-filter].weight", llmd.NotNeeded},
		want{"schedulingProfiles[prefill].fallbackProfile", llmd.NoEquivalent},
		want{"schedulingProfiles[prefill]", llmd.NoEquivalent},
		want{"plugins", llmd.Different},
	)
	require.Contains(t, findings[1].Note, `"approx-prefix-cache-producer" is a approx-prefix-cache-producer`)
	require.Contains(t, findings[2].Note, `"ghost" names no plugin`)

	// An unknown plugin type is a finding, not an error: llm-d has plugins
	// out of tree.
	_, findings = loadBoth(t, epc("[{name: mine, type: my-own-scorer, parameters: {anything: [1, 2]}}, {type: token-load-scorer}]",
		"[{name: default, plugins: [{pluginRef: mine, weight: 2}, {pluginRef: token-load-scorer, weight: 0.5}]}]"))
	requireFindings(t, findings,
		want{"plugins[mine]", llmd.NoEquivalent},
		want{"schedulingProfiles[default].plugins", llmd.Different},
		want{"plugins", llmd.Different},
	)
	require.Contains(t, findings[0].Note, "my-own-scorer")
}

// llm-d's duration parameters are strings whose empty value means the
// default (a chart that templates an unset value writes ""); kvroute reads
// "" the same way, in both document forms, and still refuses a bad one.
func TestEmptyDurationParametersAreTheDefaults(t *testing.T) {
	cfg, _ := loadBoth(t, epc(`[{name: p, type: precise-prefix-cache-producer, parameters: {speculativeIndexing: true, speculativeTTL: ""}},
		{name: t, type: token-producer, parameters: {vllm: {url: "http://r:8000", timeout: "", mmTimeout: ""}}}]`,
		`[{name: default, plugins: [{pluginRef: p}]}]`))
	exp := kvroute.DefaultConfig()
	require.Equal(t, exp.Speculative.TTL, cfg.Speculative.TTL)
	require.True(t, *cfg.Speculative.Enabled)
	require.Equal(t, exp.Render.Timeout, cfg.Render.Timeout)
	require.Equal(t, exp.Render.MMTimeout, cfg.Render.MMTimeout)
	require.Equal(t, "http://r:8000", cfg.Render.URL)

	tr, err := llmd.Translate(strings.NewReader(`{"precise-prefix-cache-producer":{"speculativeTTL":""},"token-producer":{"vllm":{"url":"http://r:8000","timeout":""}}}`))
	require.NoError(t, err)
	require.Equal(t, exp.Speculative.TTL, tr.Speculative.TTL)
	require.Equal(t, exp.Render.Timeout, tr.Render.Timeout)

	_, err = llmd.LoadResult(strings.NewReader(epc(`[{name: p, type: precise-prefix-cache-producer, parameters: {speculativeTTL: "soon"}}]`, "")), llmd.Options{})
	require.ErrorContains(t, err, `plugins[p].parameters.speculativeTTL: invalid duration "soon"`)
}
