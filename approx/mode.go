package approx

// Mode is where a routing decision's cache information about an endpoint
// came from. Its values are the fixed label set of the mode metrics
// (kvroute_router_decision_mode_total, kvroute_approx_endpoint_mode).
type Mode uint8

// The modes. The zero value is ModeBlind: a decision or endpoint nobody
// classified claims no cache information.
const (
	// ModeBlind: no cache information about the endpoint took part: its
	// KV-event stream is not live and no approximate index is kept for it,
	// or the request had no block keys (render failed or disabled).
	ModeBlind Mode = iota
	// ModeApproximate: the endpoint's KV-event stream is not live, and what
	// the router believes it holds comes from the router's own earlier
	// decisions (this package's Index).
	ModeApproximate
	// ModePrecise: the endpoint's KV-event stream is live: the index holds
	// what the engine reported.
	ModePrecise
	numModes
)

var modeNames = [numModes]string{ModeBlind: "blind", ModeApproximate: "approximate", ModePrecise: "precise"}

// Modes lists every mode, in label order.
func Modes() []Mode { return []Mode{ModePrecise, ModeApproximate, ModeBlind} }

// String returns the mode's label: "precise", "approximate" or "blind".
func (m Mode) String() string {
	if m < numModes {
		return modeNames[m]
	}
	return "blind"
}

// MarshalText encodes the mode as its label, so JSON status pages show it as
// a word.
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }
