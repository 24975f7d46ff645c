package main

import (
	"bytes"
	"fmt"
	"log/slog"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/llmd"
	"github.com/kvroute/kvroute/lora"
	"github.com/kvroute/kvroute/session"
)

// configStages are the stages beside the router that the --config file
// configures, an llm-d EndpointPickerConfig's way (llmd.LoadResult): P/D
// from a profile handler and its decider, session affinity from a session
// affinity plugin, admission from the flowControl feature gate, the LoRA
// scorer from a lora-affinity-scorer. Each is nil unless the file
// configures it and its own flag is not given.
type configStages struct {
	disagg    *disagg.Config
	session   *session.Config
	admission *admission.Config
	lora      *lora.Config
}

// loadConfigResult reads the router configuration (YAML or JSON,
// llmd.LoadResult): a kvroute configuration, possibly with llm-d plugin
// parameters, or an llm-d EndpointPickerConfig whole. Each llm-d setting
// it does not carry over is logged, one line each, or with strict an
// error; model, when set, overrides the file's.
func loadConfigResult(path, model string, strict bool, log *slog.Logger) (llmd.Result, error) {
	if path == "" {
		res := llmd.Result{Config: kvroute.DefaultConfig()}
		if model != "" {
			res.Config.Model = model
		}
		return res, nil
	}
	// Errors name the flag, as those of the stages' configuration flags do
	// (--config-file is the same flag under llm-d's name).
	source := "--config " + path
	raw, err := readConfigFile(path)
	if err != nil {
		return llmd.Result{Config: kvroute.DefaultConfig()}, fmt.Errorf("%s: %w", source, err)
	}
	return decodeConfigResult(raw, source, model, strict, log)
}

// loadConfigStages is loadConfigResult for the flags f: it returns the
// router configuration and the stages the file configures whose own flag
// is not given. A stage configured both ways is an error naming both, so
// that neither silently wins.
func loadConfigStages(f flags, log *slog.Logger) (kvroute.Config, configStages, error) {
	res, err := loadFlagsConfig(f, log)
	if err != nil {
		return res.Config, configStages{}, err
	}
	both := func(flag, path, what string) error {
		return fmt.Errorf("%s configures %s and so does %s %s: give it in one of them", configSource(f), what, flag, path)
	}
	switch {
	case res.Disagg != nil && f.disaggConfig != "":
		return res.Config, configStages{}, both("--disagg-config", f.disaggConfig, "prefill/decode disaggregation (a profile handler with a prefill decider)")
	case res.Session != nil && f.sessionConfig != "":
		return res.Config, configStages{}, both("--session-config", f.sessionConfig, "session affinity (a session-affinity plugin)")
	case res.Admission != nil && f.admissionConfig != "":
		return res.Config, configStages{}, both("--admission-config", f.admissionConfig, "admission (the flowControl feature gate)")
	case res.LoRA != nil && f.loraConfig != "":
		return res.Config, configStages{}, both("--lora-config", f.loraConfig, "the LoRA adapter-affinity scorer (a lora-affinity-scorer)")
	}
	for _, s := range []struct {
		what string
		on   bool
	}{{"prefill/decode disaggregation", res.Disagg != nil}, {"session affinity", res.Session != nil}, {"admission", res.Admission != nil}, {"LoRA adapter affinity", res.LoRA != nil}} {
		if s.on {
			log.Info("stage configured by --config", "config", configSource(f), "stage", s.what)
		}
	}
	return res.Config, configStages{disagg: res.Disagg, session: res.Session, admission: res.Admission, lora: res.LoRA}, nil
}

// newDisagg builds the P/D profile of --disagg-config (YAML or JSON,
// package disagg's keys, checked strictly) or, without the flag, of cfg,
// the --config file's; nil with neither.
func newDisagg(path string, cfg *disagg.Config, opts disagg.Options) (*disagg.Profile, error) {
	where := "--config's P/D"
	switch {
	case path != "":
		raw, err := readYAMLOrJSON(path)
		if err != nil {
			return nil, fmt.Errorf("--disagg-config: %w", err)
		}
		dcfg, err := disagg.LoadConfig(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("--disagg-config %s: %w", path, err)
		}
		cfg, where = &dcfg, "--disagg-config "+path
	case cfg == nil:
		return nil, nil
	}
	p, err := disagg.New(*cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return p, nil
}
