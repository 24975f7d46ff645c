package llmd_test

import (
	"fmt"
	"strings"

	"github.com/kvroute/kvroute/llmd"
)

// An llm-d plugin's parameters, pasted under its plugin type name next to
// kvroute's own keys, become kvroute settings.
func ExampleTranslate() {
	cfg, err := llmd.Translate(strings.NewReader(`{
		"model": "Qwen/Qwen3-32B",
		"precise-prefix-cache-producer": {
			"tokenProcessorConfig": {"blockSizeTokens": 16},
			"kvEventsConfig": {"podDiscoveryConfig": {"socketPort": 5556, "replaySocketPort": 5557}}
		},
		"prefix-cache-affinity-filter": {"maxTTFTPenaltyMs": 12000}
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Model, cfg.BlockSize, cfg.Events.EventsPort, cfg.Events.ReplayPort, *cfg.Affinity.MaxTTFTPenalty)

	// A setting given both ways is an error naming both keys.
	_, err = llmd.Translate(strings.NewReader(`{"blockSize": 64,
		"precise-prefix-cache-producer": {"tokenProcessorConfig": {"blockSizeTokens": 16}}}`))
	fmt.Println(err)
	// Output:
	// Qwen/Qwen3-32B 16 5556 5557 12s
	// kvroute: invalid config: precise-prefix-cache-producer.tokenProcessorConfig.blockSizeTokens and blockSize set the same setting; keep one
}

// An llm-d EndpointPickerConfig, whole: the plugins kvroute implements are
// translated and everything else is reported, each with its path.
func ExampleLoad() {
	cfg, findings, err := llmd.Load(strings.NewReader(`
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
  - type: token-producer
    parameters: {modelName: Qwen/Qwen3-32B}
  - type: precise-prefix-cache-producer
    parameters:
      tokenProcessorConfig: {blockSizeTokens: 64, hashSeed: "42"}
  - type: prefix-cache-affinity-filter
  - type: token-load-scorer
  - type: queue-scorer
schedulingProfiles:
  - name: default
    plugins:
      - pluginRef: prefix-cache-affinity-filter
      - pluginRef: token-load-scorer
        weight: 2
      - pluginRef: queue-scorer
`), llmd.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Model, cfg.BlockSize, cfg.LoadWeight)
	for _, f := range findings {
		fmt.Println(f.Path, "|", f.Kind)
	}
	// Output:
	// Qwen/Qwen3-32B 64 2
	// plugins[token-producer].parameters.vllm.url | kvroute does this differently
	// plugins[precise-prefix-cache-producer].parameters.tokenProcessorConfig.hashSeed | ignored: not needed
	// plugins[prefix-cache-affinity-filter] | kvroute does this differently
	// plugins[queue-scorer] | kvroute does this differently
}
