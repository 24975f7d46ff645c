package llmd

import (
	"io"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/lora"
	"github.com/kvroute/kvroute/session"
)

// Result is everything Load carries over from one document: the router's
// kvroute.Config and the stages kvroute runs beside the router, which an
// llm-d EndpointPickerConfig configures with plugins and kvroute with
// files of their own (kvroute-epp's --disagg-config, --session-config,
// --admission-config and --lora-config). A stage the document does not configure is nil.
type Result struct {
	// Config is the router's configuration, as Load returns it.
	Config kvroute.Config
	// Disagg is prefill/decode disaggregation, from a
	// disagg-profile-handler (or pd-profile-handler) whose prefill decider
	// is a prefix-based-pd-decider or an always-disagg-pd-decider. Endpoint
	// roles come from the pods' disagg.DefaultRoleLabel, the label llm-d's
	// prefill-filter and decode-filter read.
	Disagg *disagg.Config
	// Session is session affinity, from a session-affinity-scorer or
	// session-affinity-filter and the session-id-producers its session_id
	// sources read.
	Session *session.Config
	// Admission is the admission stage, from llm-d's flowControl feature
	// gate and its flowControl section.
	Admission *admission.Config
	// LoRA is the LoRA adapter-affinity scorer (package lora), from a
	// lora-affinity-scorer that a scheduling profile kvroute runs
	// references, its weight the profile's (the decode profile's under
	// P/D); the host adds it to the router's scorers, and under P/D to the
	// decode pick's, fed by an engine metrics scraper.
	LoRA *lora.Config
	// Findings are the settings not carried over, as Load returns them.
	Findings []Finding
}

// LoadResult is Load returning the stages beside the router's
// configuration too: each is validated by its package's rules, and with
// Options.Strict, as the router's configuration, only returned when the
// document translates whole. Load reports each such stage as a Finding
// instead, since its caller does not run it. A kvroute configuration
// document (not an EndpointPickerConfig) configures no stage here: the
// parameters block of a stage's llm-d plugin in it is an error.
func LoadResult(r io.Reader, opts Options) (Result, error) {
	return load(r, opts, true)
}

// stages are the optional stages an EndpointPickerConfig translates into,
// each with the path of the setting that configured it.
type stages struct {
	disagg                           *disagg.Config
	session                          *session.Config
	admission                        *admission.Config
	lora                             *lora.Config
	disaggAt, sessionAt, admissionAt string
	loraAt                           string
	// decodeProfile names a P/D profile handler's decode profile, which
	// llm-d runs for the request's own pick, P/D or not; "" without a
	// handler.
	decodeProfile string
}

// dropped returns a Finding for each stage of s, for Load, whose caller
// takes the router's configuration only: a host that reads its
// configuration with Load runs none of them unless it configures them
// itself.
func (s stages) dropped() []Finding {
	var out []Finding
	add := func(on bool, at, what string) {
		if on {
			out = append(out, Finding{Path: at, Kind: Different, Note: "kvroute runs " + what +
				" beside the router: llmd.LoadResult returns its configuration (kvroute-epp runs it); llmd.Load does not, so configure it where the host reads it"})
		}
	}
	add(s.disagg != nil, s.disaggAt, "prefill/decode disaggregation (package disagg; the gateway's disagg block)")
	add(s.session != nil, s.sessionAt, "session affinity (package session; the gateway's session block)")
	add(s.admission != nil, s.admissionAt, "the admission stage (package admission; the gateway's admission block)")
	add(s.lora != nil, s.loraAt, "the LoRA adapter-affinity scorer (package lora; the gateway's lora block)")
	return out
}

// validate checks each stage by its package's rules.
func (s stages) validate() error {
	if s.disagg != nil {
		if err := s.disagg.Validate(); err != nil {
			return invalid(err)
		}
	}
	if s.session != nil {
		if err := s.session.Validate(); err != nil {
			return invalid(err)
		}
	}
	if s.admission != nil {
		if err := s.admission.Validate(); err != nil {
			return invalid(err)
		}
	}
	if s.lora != nil {
		if err := s.lora.Validate(); err != nil {
			return invalid(err)
		}
	}
	return nil
}
