package main

import (
	"bytes"
	"fmt"

	"github.com/kvroute/kvroute/session"
	"github.com/kvroute/kvroute/telemetry"
)

// newSession builds session affinity from --session-config (YAML or JSON,
// package session's keys, checked strictly) or, without the flag, from
// fromConfig, the --config file's; nil with neither.
func newSession(path string, fromConfig *session.Config, set telemetry.Set) (*session.Affinity, error) {
	if path == "" {
		if fromConfig == nil {
			return nil, nil
		}
		a, err := session.New(*fromConfig, session.Options{Set: set})
		if err != nil {
			return nil, fmt.Errorf("--config's session affinity: %w", err)
		}
		return a, nil
	}
	raw, err := readYAMLOrJSON(path)
	if err != nil {
		return nil, fmt.Errorf("--session-config: %w", err)
	}
	cfg, err := session.LoadConfig(bytes.NewReader(raw))
	if err == nil {
		var a *session.Affinity
		if a, err = session.New(cfg, session.Options{Set: set}); err == nil {
			return a, nil
		}
	}
	return nil, fmt.Errorf("--session-config %s: %w", path, err)
}
