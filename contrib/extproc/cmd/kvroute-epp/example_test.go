package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
)

// kvroute-epp with a static list of engines and a --config file that
// pastes llm-d's precise-prefix-cache-producer parameters beside kvroute's
// own keys: the picker's router takes its block size and KV-event replay
// port from them, and --model overrides the file's model. A command line
// naming neither a pool nor endpoints is refused before anything starts.
func Example() {
	dir, err := os.MkdirTemp("", "kvroute-epp-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "router.yaml")
	if err := os.WriteFile(path, []byte(`model: from-file
precise-prefix-cache-producer:
  tokenProcessorConfig: {blockSizeTokens: 16}
  kvEventsConfig:
    podDiscoveryConfig: {socketPort: 5556, replaySocketPort: 5557}
`), 0o600); err != nil {
		fmt.Println(err)
		return
	}

	f, err := parseFlags([]string{"--endpoints", "10.0.0.1:8000,10.0.0.2:8000", "--config", path,
		"--model", "meta-llama/Llama-3.1-8B-Instruct"}, io.Discard)
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg, err := loadConfig(f.configPath, f.model, f.strictConfig, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f.endpoints, f.grpcPort, cfg.Model, cfg.BlockSize, cfg.Events.ReplayPort)

	_, err = parseFlags(nil, io.Discard)
	fmt.Println(err)
	// Output:
	// 10.0.0.1:8000,10.0.0.2:8000 9002 meta-llama/Llama-3.1-8B-Instruct 16 5557
	// set exactly one of --pool-name, --endpoint-selector and --endpoints
}
