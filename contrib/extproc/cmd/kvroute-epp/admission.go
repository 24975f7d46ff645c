package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/internal/yamldoc"
	"github.com/kvroute/kvroute/telemetry"
)

// admissionStage is the picker's admission stage and the engine-metrics
// scraper feeding it and the LoRA scorer, both optional.
type admissionStage struct {
	ctl     *admission.Controller  // nil without an admission stage (--admission-config or the --config file's)
	scraper *enginemetrics.Scraper // nil without --engine-metrics-config and the LoRA scorer
}

// newAdmissionStage builds the admission stage of --admission-config or,
// without the flag, of fromConfig (the --config file's), and the scraper
// of --engine-metrics-config (YAML or JSON, unknown keys refused), or
// nothing when neither stage is configured. With scrape (the LoRA scorer
// reads the scraper) the scraper is built even without
// --engine-metrics-config, with enginemetrics' defaults, and then feeds
// the scorer only, as the gateway's does.
func newAdmissionStage(admissionPath string, fromConfig *admission.Config, enginePath string, scrape bool, set telemetry.Set) (*admissionStage, error) {
	st := &admissionStage{}
	var acfg *admission.Config
	where := "--admission-config " + admissionPath
	switch {
	case admissionPath != "":
		raw, err := readYAMLOrJSON(admissionPath)
		if err != nil {
			return nil, fmt.Errorf("--admission-config: %w", err)
		}
		c, err := admission.LoadConfig(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("--admission-config %s: %w", admissionPath, err)
		}
		acfg = &c
	case fromConfig != nil:
		acfg, where = fromConfig, "--config's admission stage"
	case enginePath != "" && !scrape:
		return nil, errors.New("--engine-metrics-config feeds the admission stage and the LoRA scorer; set --admission-config or --lora-config too")
	case !scrape:
		return st, nil
	}
	var err error
	if enginePath != "" || scrape {
		var ecfg enginemetrics.Config // the defaults, for the LoRA scorer alone
		if enginePath != "" {
			raw, err := readYAMLOrJSON(enginePath)
			if err != nil {
				return nil, fmt.Errorf("--engine-metrics-config: %w", err)
			}
			if ecfg, err = enginemetrics.LoadConfig(bytes.NewReader(raw)); err != nil {
				return nil, fmt.Errorf("--engine-metrics-config %s: %w", enginePath, err)
			}
		}
		if st.scraper, err = enginemetrics.New(ecfg, enginemetrics.Options{Set: set}); err != nil {
			if enginePath == "" {
				return nil, fmt.Errorf("the LoRA scorer's engine metrics scraper: %w", err)
			}
			return nil, fmt.Errorf("--engine-metrics-config %s: %w", enginePath, err)
		}
	}
	if acfg == nil {
		return st, nil // the scraper feeds the LoRA scorer only
	}
	aopts := admission.Options{Set: set}
	if enginePath != "" {
		aopts.Detectors = []admission.Detector{st.scraper}
		aopts.Signals = st.scraper // the dispatch gate's headroom
	}
	if st.ctl, err = admission.New(*acfg, aopts); err != nil {
		st.close()
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return st, nil
}

// setEndpoints tells the scraper, if any, which engines to scrape.
func (st *admissionStage) setEndpoints(eps []kvroute.Endpoint) {
	if st.scraper != nil {
		st.scraper.SetEndpoints(eps)
	}
}

// close refuses the requests still queued (503, closed) and stops the
// scraper.
func (st *admissionStage) close() {
	if st.ctl != nil {
		st.ctl.Close()
	}
	if st.scraper != nil {
		st.scraper.Close()
	}
}

// maxConfigFile bounds a configuration file; real ones are a few KiB.
const maxConfigFile = 16 << 20

// readConfigFile reads a configuration file of at most maxConfigFile bytes,
// without reading a larger one whole.
func readConfigFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxConfigFile+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > maxConfigFile {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxConfigFile)
	}
	return raw, nil
}

// readYAMLOrJSON reads a YAML or JSON configuration file as JSON. A key
// given twice in one mapping is an error (YAMLToJSONStrict), as in every
// kvroute configuration, rather than the last one silently winning before
// the package's decoder could see the repetition; so is a file of more
// than one YAML document, rather than its first read alone and the rest
// dropped unread (yamldoc.ToJSON).
func readYAMLOrJSON(path string) ([]byte, error) {
	raw, err := readConfigFile(path)
	if err != nil {
		return nil, err
	}
	j, err := yamldoc.ToJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return j, nil
}
