package main

import (
	"bytes"
	"fmt"

	"github.com/kvroute/kvroute/lora"
	"github.com/kvroute/kvroute/telemetry"
)

// loraStage is the LoRA adapter-affinity scorer's configuration, from
// --lora-config or the --config file, and where it came from.
type loraStage struct {
	cfg   *lora.Config // nil: no LoRA scorer
	where string
}

// loadLoRAConfig reads --lora-config (YAML or JSON, package lora's keys,
// checked strictly) or, without the flag, takes fromConfig, the --config
// file's (llm-d's lora-affinity-scorer); no scorer with neither. It runs
// before anything is built, so that a bad file starts nothing.
func loadLoRAConfig(path string, fromConfig *lora.Config) (loraStage, error) {
	if path == "" {
		if fromConfig == nil {
			return loraStage{}, nil
		}
		if err := fromConfig.Validate(); err != nil {
			return loraStage{}, fmt.Errorf("--config's LoRA scorer: %w", err)
		}
		return loraStage{cfg: fromConfig, where: "--config's LoRA scorer"}, nil
	}
	raw, err := readYAMLOrJSON(path)
	if err != nil {
		return loraStage{}, fmt.Errorf("--lora-config: %w", err)
	}
	cfg, err := lora.LoadConfig(bytes.NewReader(raw))
	if err != nil {
		return loraStage{}, fmt.Errorf("--lora-config %s: %w", path, err)
	}
	return loraStage{cfg: &cfg, where: "--lora-config " + path}, nil
}

// on reports whether a LoRA scorer is configured, so that the admission
// stage builds the engine metrics scraper it reads.
func (l loraStage) on() bool { return l.cfg != nil }

// newScorer builds the LoRA scorer, reading adapter state from adm's
// engine metrics scraper (built for it: on); nil when none is configured.
// Its Close unregisters its metric.
func (l loraStage) newScorer(adm *admissionStage, set telemetry.Set) (*lora.Scorer, error) {
	if l.cfg == nil {
		return nil, nil
	}
	if adm.scraper == nil {
		return nil, fmt.Errorf("%s: no engine metrics scraper to read adapter state from", l.where)
	}
	s, err := lora.New(*l.cfg, adm.scraper, lora.Options{Set: set})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", l.where, err)
	}
	return s, nil
}
