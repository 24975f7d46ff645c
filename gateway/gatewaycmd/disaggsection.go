package gatewaycmd

import (
	"encoding/json"
	"fmt"

	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/disagg/sidecar"
	"github.com/kvroute/kvroute/gateway"
	"github.com/kvroute/kvroute/internal/jsonconf"
)

// Keys of the "disagg" block that are the gateway's, not disagg.Config's.
const (
	disaggKeyMode     = "mode"
	disaggKeyExchange = "exchange"
)

// disaggSection is the gateway's "disagg" block: disagg.Config's keys
// (the profile and its decider) beside "mode" and "exchange"
// (gateway.DisaggHostConfig: how the gateway carries out a split). The
// embedded Config lists its keys for jsonconf's unknown-key check;
// UnmarshalJSON hands each part to its own decoder.
type disaggSection struct {
	disagg.Config
	// Mode is gateway.DisaggHostConfig.Mode: "header" (the default) or
	// "exchange".
	Mode string `json:"mode"`
	// Exchange is gateway.DisaggHostConfig.Exchange, the exchange mode's
	// prefill step (prefillTimeout, maxBodyBytes, maxPrefillResponseBytes,
	// prefillerScheme; decoderURL is refused).
	Exchange sidecar.Config `json:"exchange"`
}

// UnmarshalJSON decodes the block: mode and exchange here (unknown keys
// and bare-number durations rejected), the rest as disagg.Config.
func (s *disaggSection) UnmarshalJSON(data []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	if raw, ok := m[disaggKeyMode]; ok {
		if err := json.Unmarshal(raw, &s.Mode); err != nil {
			return fmt.Errorf("%s: %w", disaggKeyMode, err)
		}
		delete(m, disaggKeyMode)
	}
	if raw, ok := m[disaggKeyExchange]; ok {
		if err := jsonconf.Unmarshal(raw, &s.Exchange); err != nil {
			return fmt.Errorf("%s: %w", disaggKeyExchange, err)
		}
		delete(m, disaggKeyExchange)
	}
	rest, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return s.Config.UnmarshalJSON(rest)
}

// MarshalJSON encodes the block as one object.
func (s disaggSection) MarshalJSON() ([]byte, error) {
	b, err := s.Config.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if m[disaggKeyMode], err = json.Marshal(s.Mode); err != nil {
		return nil, err
	}
	if m[disaggKeyExchange], err = jsonconf.Marshal(s.Exchange); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// host is the block's gateway.DisaggHostConfig.
func (s *disaggSection) host() gateway.DisaggHostConfig {
	return gateway.DisaggHostConfig{Mode: s.Mode, Exchange: s.Exchange}
}

// validate checks both parts.
func (s *disaggSection) validate() error {
	if err := s.Config.Validate(); err != nil {
		return err
	}
	return s.host().ValidateFor(s.Config)
}
