package main

import (
	"bytes"
	"fmt"

	"github.com/kvroute/kvroute/approx"
	"github.com/kvroute/kvroute/telemetry"
)

// newApproximate builds the router's approximate index from
// --approximate-config (YAML or JSON, package approx's keys); without the
// flag it keeps no entries but still gives every endpoint's cache mode to
// the status page and /ready.
func newApproximate(path string, set telemetry.Set) (*approx.Index, error) {
	var cfg approx.Config
	if path != "" {
		raw, err := readYAMLOrJSON(path)
		if err != nil {
			return nil, fmt.Errorf("--approximate-config: %w", err)
		}
		if cfg, err = approx.LoadConfig(bytes.NewReader(raw)); err != nil {
			return nil, fmt.Errorf("--approximate-config %s: %w", path, err)
		}
	}
	return approx.New(cfg, approx.Options{Set: telemetry.Set{Registerer: set.Registerer, Clock: set.Clock}})
}
