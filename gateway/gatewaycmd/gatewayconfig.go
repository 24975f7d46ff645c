package gatewaycmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/approx"
	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/gateway"
	"github.com/kvroute/kvroute/internal/jsonconf"
	"github.com/kvroute/kvroute/lora"
	"github.com/kvroute/kvroute/models"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/session"
)

// gatewaySection is the key of the --config file's gateway settings; every
// other key is the router's configuration.
const gatewaySection = "gateway"

// gatewayConfig is the "gateway" section of the --config file: the limits
// the gateway puts on its clients. Zero values take the gateway package's
// defaults; durations are Go duration strings, as everywhere in kvroute's
// configuration.
type gatewayConfig struct {
	// MaxBodyBytes is gateway.Config.MaxBodyBytes (--max-body-bytes
	// overrides it).
	MaxBodyBytes int64 `json:"maxBodyBytes"`
	// MaxBodyBytesInFlight is gateway.Config.MaxBodyBytesInFlight.
	MaxBodyBytesInFlight int64 `json:"maxBodyBytesInFlight"`
	// ReadHeaderTimeout is gateway.ServerConfig.ReadHeaderTimeout; the
	// --snapshot-listen listener applies it too.
	ReadHeaderTimeout time.Duration `json:"readHeaderTimeout"`
	// BodyReadTimeout is gateway.Config.BodyReadTimeout.
	BodyReadTimeout time.Duration `json:"bodyReadTimeout"`
	// ResponseWriteTimeout is gateway.Config.ResponseWriteTimeout.
	ResponseWriteTimeout time.Duration `json:"responseWriteTimeout"`
	// IdleTimeout is gateway.ServerConfig.IdleTimeout; the
	// --snapshot-listen listener applies it too.
	IdleTimeout time.Duration `json:"idleTimeout"`
	// Admission is gateway.ServerConfig.Admission: present (even as {})
	// turns the admission stage on, absent leaves it off. Its keys are
	// admission.Config's.
	Admission *admission.Config `json:"admission"`
	// EngineMetrics is gateway.ServerConfig.EngineMetrics: present (even
	// as {}) with admission, the engines' /metrics are scraped for the
	// admission's saturation signal; with lora, peerLoadFromMetrics or an
	// enabled approximate index whose capacityFrom is not "config", it is
	// the settings of the scraper that feeds them. Its keys are
	// enginemetrics.Config's.
	EngineMetrics *enginemetrics.Config `json:"engineMetrics"`
	// LoRA is gateway.ServerConfig.LoRA: present (even as {}) adds the
	// LoRA adapter-affinity scorer, fed by the engines' /metrics (scraped
	// with engineMetrics' settings, or its defaults). Its keys are
	// lora.Config's.
	LoRA *lora.Config `json:"lora"`
	// TokenizeOnce is gateway.Config.TokenizeOnce: the APIs forwarded
	// with the rendered token IDs instead of the text (only
	// "completions" qualifies).
	TokenizeOnce []render.API `json:"tokenizeOnce"`
	// Disagg is gateway.ServerConfig.Disagg: present (even as {}) turns
	// prefill/decode disaggregation on (package disagg's profile; the
	// prefill endpoint travels in x-prefiller-host-port), absent leaves it
	// off. Its keys are disagg.Config's (splitAPIs among them: the APIs
	// whose requests may be split), plus "mode" ("header", the
	// default, or "exchange": the gateway runs the two-step exchange
	// itself) and "exchange" (its prefill step's settings:
	// gateway.ServerConfig.DisaggHost).
	Disagg *disaggSection `json:"disagg"`
	// Session is gateway.ServerConfig.Session: present (even as {}) turns
	// session affinity on, absent leaves it off. Its keys are
	// session.Config's.
	Session *session.Config `json:"session"`
	// Models is gateway.ServerConfig.Models: present (even as {}) serves
	// several models behind the one router (each endpoint's served models
	// from models.served, the endpoint label models.label, or the engines'
	// /v1/models with models.poll; adapters' base models models.adapters;
	// the rewrite table models.rewrites). Its keys are models.Config's.
	Models *models.Config `json:"models"`
	// Approximate is gateway.ServerConfig.Approximate: the approximate
	// prefix index of endpoints whose KV events are not live. Its keys are
	// approx.Config's ({"enabled": true} turns it on).
	Approximate *approx.Config `json:"approximate"`
	// AllowClientKVTransferParams is gateway.Config's: forward the
	// kv_transfer_params a client's body carries instead of removing them.
	AllowClientKVTransferParams bool `json:"allowClientKVTransferParams"`
	// CORSAllowedOrigins and CORSAllowCredentials are gateway.Config's:
	// the engines' --allowed-origins and --allow-credentials, for the
	// answers the gateway writes itself.
	CORSAllowedOrigins   []string `json:"corsAllowedOrigins"`
	CORSAllowCredentials bool     `json:"corsAllowCredentials"`
	// PeerLoadFromMetrics is gateway.ServerConfig.PeerLoadFromMetrics:
	// true estimates the other gateway replicas' load on each engine from
	// its scraped queue (with engineMetrics' settings, or its defaults).
	PeerLoadFromMetrics bool `json:"peerLoadFromMetrics"`
}

// validate rejects negative values, which have no meaning, and what the
// gateway would refuse when it starts (gateway.Config.Validate).
func (g gatewayConfig) validate() error {
	for _, f := range []struct {
		name string
		v    int64
		s    string
	}{
		{"maxBodyBytes", g.MaxBodyBytes, fmt.Sprint(g.MaxBodyBytes)},
		{"maxBodyBytesInFlight", g.MaxBodyBytesInFlight, fmt.Sprint(g.MaxBodyBytesInFlight)},
		{"readHeaderTimeout", int64(g.ReadHeaderTimeout), g.ReadHeaderTimeout.String()},
		{"bodyReadTimeout", int64(g.BodyReadTimeout), g.BodyReadTimeout.String()},
		{"responseWriteTimeout", int64(g.ResponseWriteTimeout), g.ResponseWriteTimeout.String()},
		{"idleTimeout", int64(g.IdleTimeout), g.IdleTimeout.String()},
	} {
		if f.v < 0 {
			return fmt.Errorf("%s.%s: %s is negative", gatewaySection, f.name, f.s)
		}
	}
	// The gateway's own checks of these keys, which it makes again when it
	// starts; their errors name the key ("gateway: tokenizeOnce ...").
	proxy := gateway.Config{TokenizeOnce: g.TokenizeOnce, CORSAllowedOrigins: g.CORSAllowedOrigins, CORSAllowCredentials: g.CORSAllowCredentials}
	if err := proxy.Validate(); err != nil {
		return err
	}
	if g.Admission != nil {
		if err := g.Admission.Validate(); err != nil {
			return fmt.Errorf("%s.admission: %w", gatewaySection, err)
		}
	}
	if g.EngineMetrics != nil {
		if err := g.EngineMetrics.Validate(); err != nil {
			return fmt.Errorf("%s.engineMetrics: %w", gatewaySection, err)
		}
	}
	if g.Disagg != nil {
		if err := g.Disagg.validate(); err != nil {
			return fmt.Errorf("%s.disagg: %w", gatewaySection, err)
		}
	}
	if g.LoRA != nil {
		if err := g.LoRA.Validate(); err != nil {
			return fmt.Errorf("%s.lora: %w", gatewaySection, err)
		}
	}
	// The approximate index reads the engines' capacities from the scraper
	// unless its capacityFrom is "config" (gateway.ServerConfig.Approximate).
	capacities := g.Approximate != nil && g.Approximate.Enabled && g.Approximate.CapacityFrom != approx.CapacityFromConfig
	if g.EngineMetrics != nil && g.Admission == nil && g.LoRA == nil && !g.PeerLoadFromMetrics && !capacities {
		return fmt.Errorf("%s.engineMetrics: feeds the admission stage, the lora scorer, peerLoadFromMetrics and the approximate index's capacities; set %s.admission, %s.lora, %s.peerLoadFromMetrics or %s.approximate.enabled too",
			gatewaySection, gatewaySection, gatewaySection, gatewaySection, gatewaySection)
	}
	if g.Session != nil {
		if err := g.Session.Validate(); err != nil {
			return fmt.Errorf("%s.session: %w", gatewaySection, err)
		}
	}
	if g.Models != nil {
		if err := g.Models.Validate(); err != nil {
			return fmt.Errorf("%s.models: %w", gatewaySection, err)
		}
	}
	if g.Approximate != nil {
		if err := g.Approximate.Validate(); err != nil {
			return fmt.Errorf("%s.approximate: %w", gatewaySection, err)
		}
	}
	return nil
}

// apply sets g's values on the server's configuration.
func (g gatewayConfig) apply(s *gateway.ServerConfig) {
	s.Proxy.MaxBodyBytes = g.MaxBodyBytes
	s.Proxy.MaxBodyBytesInFlight = g.MaxBodyBytesInFlight
	s.Proxy.BodyReadTimeout = g.BodyReadTimeout
	s.Proxy.ResponseWriteTimeout = g.ResponseWriteTimeout
	s.ReadHeaderTimeout = g.ReadHeaderTimeout
	s.IdleTimeout = g.IdleTimeout
	s.Proxy.TokenizeOnce = g.TokenizeOnce
	s.Proxy.CORSAllowedOrigins, s.Proxy.CORSAllowCredentials = g.CORSAllowedOrigins, g.CORSAllowCredentials
	s.Proxy.AllowClientKVTransferParams = g.AllowClientKVTransferParams
	s.Admission = g.Admission
	s.EngineMetrics = g.EngineMetrics
	if g.Disagg != nil {
		s.Disagg, s.DisaggHost = &g.Disagg.Config, g.Disagg.host()
	}
	s.LoRA = g.LoRA
	s.Session = g.Session
	s.Models = g.Models
	s.Approximate = g.Approximate
	s.PeerLoadFromMetrics = g.PeerLoadFromMetrics
}

// decodeGatewaySection reads the "gateway" member of a configuration
// document with jsonconf's rules (unknown keys and bare-number durations
// are errors naming their path, such as gateway.bodyReadTimeout).
func decodeGatewaySection(raw json.RawMessage) (gatewayConfig, error) {
	var doc struct {
		Gateway gatewayConfig `json:"gateway"`
	}
	if raw == nil {
		return doc.Gateway, nil
	}
	var buf bytes.Buffer
	buf.WriteString(`{"` + gatewaySection + `":`)
	buf.Write(raw)
	buf.WriteByte('}')
	if err := jsonconf.Decode(&buf, &doc); err != nil {
		return gatewayConfig{}, err
	}
	return doc.Gateway, doc.Gateway.validate()
}

// splitGatewaySection takes the "gateway" member out of a JSON
// configuration object and returns it (nil when absent) with the rest, the
// router's configuration, whose members keep their order and repetitions
// for llmd.Translate to judge. A document that is not a well-formed
// object comes back whole, for Translate to report.
func splitGatewaySection(data []byte) (gateway json.RawMessage, router []byte, err error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, data, nil
	}
	var rest bytes.Buffer
	rest.WriteByte('{')
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, data, nil
		}
		key, _ := tok.(string) // an object's member starts with its key
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, data, nil
		}
		if key == gatewaySection {
			if gateway != nil {
				return nil, nil, errors.New(gatewaySection + ": key given twice")
			}
			gateway = v
			continue
		}
		if rest.Len() > 1 {
			rest.WriteByte(',')
		}
		k, _ := json.Marshal(key) // a string always encodes
		rest.Write(k)
		rest.WriteByte(':')
		rest.Write(v)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, data, nil
	}
	if len(bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n")) > 0 { // data after the object
		return nil, data, nil
	}
	rest.WriteByte('}')
	return gateway, rest.Bytes(), nil
}
