package main

import (
	"bytes"
	"fmt"
	"log/slog"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/llmd"
)

// loadFlagsConfig is loadConfigResult for the flags f: the configuration
// of --config-text when given, otherwise of the file --config or
// --config-file names.
func loadFlagsConfig(f flags, log *slog.Logger) (llmd.Result, error) {
	if f.configText == "" {
		return loadConfigResult(f.configPath, f.model, f.strictConfig, log)
	}
	if len(f.configText) > maxConfigFile {
		return llmd.Result{Config: kvroute.DefaultConfig()}, fmt.Errorf("--config-text: larger than %d bytes", maxConfigFile)
	}
	return decodeConfigResult([]byte(f.configText), "--config-text", f.model, f.strictConfig, log)
}

// configSource names where the configuration came from, for errors.
func configSource(f flags) string {
	if f.configText != "" {
		return "--config-text"
	}
	return "--config " + f.configPath
}

// decodeConfigResult reads a router configuration (YAML or JSON,
// llmd.LoadResult) from raw, which came from source ("--config <file>", or
// --config-text): a kvroute configuration, possibly with llm-d plugin
// parameters, or an llm-d EndpointPickerConfig whole, with the stages it
// configures beside the router. Each llm-d setting it does not carry over
// is logged, one line each, or with strict an error. model, when set,
// overrides the configuration's.
func decodeConfigResult(raw []byte, source, model string, strict bool, log *slog.Logger) (llmd.Result, error) {
	res, err := llmd.LoadResult(bytes.NewReader(raw), llmd.Options{Strict: strict})
	if err != nil {
		return res, fmt.Errorf("%s: %w", source, err)
	}
	for _, f := range res.Findings {
		log.Warn("llm-d setting not carried over", "config", source, "key", f.Path, "finding", f.Kind.String(), "note", f.Note)
	}
	if model != "" {
		res.Config.Model = model
	}
	return res, nil
}
