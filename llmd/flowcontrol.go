package llmd

import (
	"encoding/json"
	"time"

	"github.com/kvroute/kvroute/admission"
)

// flowControlGate is the llm-d feature gate that turns flow control on.
const flowControlGate = "flowControl"

// llmdQueueTimeout is llm-d's flowControl.defaultRequestTTL default.
const llmdQueueTimeout = 60 * time.Second

// Notes of the admission translation.
const (
	noteAdmission = "kvroute's admission stage is package admission (kvroute-epp --admission-config, with --engine-metrics-config for the engines' vLLM metrics): an EndpointPickerConfig turns it on with the flowControl feature gate"
	noteObjective = "kvroute's admission stage takes each objective's priority from its own objectives key (--admission-config objectives: name, priority), not from InferenceObjective resources, and judges saturation by its own accounting (saturation.maxPrefillBacklog, saturation.maxOpenRequests) and, with --engine-metrics-config, the engines' vLLM metrics; list the objectives there"
)

// flowControlParams is an EndpointPickerConfig's flowControl section.
type flowControlParams struct {
	// DefaultRequestTTL is admission's queueTimeout; "0s", which lets
	// llm-d's requests wait forever, is a finding.
	DefaultRequestTTL           *time.Duration  `json:"defaultRequestTTL"`
	MaxBytes                    json.RawMessage `json:"maxBytes" finding:"different:llm-d bounds the bytes of every active request; kvroute bounds its queue's estimated prompt bytes (--admission-config maxQueuedBytes, default 256 MiB)"`
	MaxRequests                 json.RawMessage `json:"maxRequests" finding:"different:llm-d bounds its active requests; kvroute bounds its queued requests (--admission-config maxQueuedRequests, default 10000)"`
	NoEndpointRequestTTL        json.RawMessage `json:"noEndpointRequestTTL" finding:"none:kvroute has one queue timeout, with endpoints or without (--admission-config queueTimeout, an objective's queueTimeout)"`
	DefaultPriorityBand         json.RawMessage `json:"defaultPriorityBand" finding:"different:kvroute's queue is bounded as a whole (--admission-config maxQueuedRequests, maxQueuedBytes), its bands come from objectives' priorities, and flows take turns by its fairness (round_robin, deficit_round_robin) and ordering (fcfs, earliest_deadline) keys"`
	DefaultNegativePriorityBand json.RawMessage `json:"defaultNegativePriorityBand" finding:"different:kvroute's queue is bounded as a whole (--admission-config maxQueuedRequests, maxQueuedBytes), its bands come from objectives' priorities, and flows take turns by its fairness (round_robin, deficit_round_robin) and ordering (fcfs, earliest_deadline) keys"`
	PriorityBands               json.RawMessage `json:"priorityBands" finding:"different:kvroute's queue is bounded as a whole (--admission-config maxQueuedRequests, maxQueuedBytes), its bands come from objectives' priorities, and flows take turns by its fairness (round_robin, deficit_round_robin) and ordering (fcfs, earliest_deadline) keys"`
	UsageLimitPolicyPluginRef   json.RawMessage `json:"usageLimitPolicyPluginRef" finding:"different:kvroute holds sheddable requests per endpoint while its engine lacks headroom (--admission-config headroom, with --engine-metrics-config)"`
	SaturationDetector          json.RawMessage `json:"saturationDetector" finding:"different:kvroute's admission judges saturation by its own accounting (--admission-config saturation.maxPrefillBacklog, saturation.maxOpenRequests) and, with --engine-metrics-config, the engines' vLLM metrics"`
	// EnableEviction true ends llm-d's sheddable requests in flight.
	EnableEviction *bool `json:"enableEviction"`
}

// translateAdmission turns llm-d's flow control (the flowControl feature
// gate and the flowControl section) into st.admission and returns the
// findings.
func translateAdmission(pc *pickerConfig, gate bool, st *stages) ([]Finding, error) {
	var fc flowControlParams
	if err := decodeStrict(pc.FlowControl, &fc, "flowControl"); err != nil {
		return nil, err
	}
	if !gate {
		if present(pc.FlowControl) {
			return []Finding{{Path: "flowControl", Kind: NotNeeded, Note: "llm-d reads flowControl only with the flowControl feature gate, which the document does not set; kvroute configures no admission stage either. " + noteAdmission}}, nil
		}
		return nil, nil
	}
	out := []Finding{{Path: "featureGates[" + flowControlGate + "]", Kind: Different, Note: noteObjective}}
	out = append(out, untranslated(&fc, "flowControl")...)
	cfg := admission.Config{QueueTimeout: llmdQueueTimeout}
	switch ttl := fc.DefaultRequestTTL; {
	case ttl == nil:
	case *ttl > 0:
		cfg.QueueTimeout = *ttl
	default:
		cfg.QueueTimeout = 0 // kvroute's default
		out = append(out, Finding{Path: "flowControl.defaultRequestTTL", Kind: NoEquivalent,
			Note: "a zero TTL lets llm-d's queued requests wait until their client leaves; kvroute bounds every wait (--admission-config queueTimeout, default 30s)"})
	}
	if fc.EnableEviction != nil && *fc.EnableEviction {
		out = append(out, Finding{Path: "flowControl.enableEviction", Kind: NoEquivalent,
			Note: "kvroute never ends a request in flight to make room: it sheds sheddable requests before they are sent"})
	}
	st.admission, st.admissionAt = &cfg, "featureGates["+flowControlGate+"]"
	return out, nil
}
