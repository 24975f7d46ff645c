package disagg

import (
	"fmt"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/disagg/sidecar"
)

// The roles of kvroute.Endpoint.Role. An endpoint without a role ("")
// serves whole requests, as RoleBoth.
const (
	// RolePrefill is an endpoint that only prefills: it computes a
	// request's prompt, answers one token and holds the KV blocks for a
	// decode endpoint to pull (vLLM with a KV connector as producer).
	RolePrefill = "prefill"
	// RoleDecode is an endpoint that decodes: it is the request's
	// destination, pulls the prompt's KV blocks from the prefill endpoint
	// named in HeaderPrefiller, or prefills locally when none is named.
	RoleDecode = "decode"
	// RoleBoth is an endpoint that serves whole requests and may take
	// either part of a disaggregated one.
	RoleBoth = "both"
)

// DefaultRoleLabel is the pod label Kubernetes discovery and the ext_proc
// picker read an endpoint's role from, as llm-d's deployments label their
// prefill and decode pods.
const DefaultRoleLabel = "llm-d.ai/role"

// HeaderPrefiller is the request header that names the prefill endpoint
// ("host:port") to the decode endpoint's routing sidecar, as llm-d's
// router sets it; absent, the decode endpoint prefills locally. It is
// sidecar.PrefillerHeader, the name the sidecar reads: one name for both.
const HeaderPrefiller = sidecar.PrefillerHeader

// HeaderPrefillerLLMD is llm-d's current name of HeaderPrefiller
// (sidecar.PrefillerHeaderLLMD): kvroute's router sets both, with the same
// value, as llm-d's router does, so that a sidecar reading either finds it.
const HeaderPrefillerLLMD = sidecar.PrefillerHeaderLLMD

// ValidRole reports whether role is one of "", RolePrefill, RoleDecode and
// RoleBoth, and says which it is not otherwise.
func ValidRole(role string) error {
	switch role {
	case "", RolePrefill, RoleDecode, RoleBoth:
		return nil
	}
	return fmt.Errorf("disagg: role %q is not one of %q, %q, %q", role, RolePrefill, RoleDecode, RoleBoth)
}

// RoleFromLabels returns the role an endpoint's labels give under key
// (DefaultRoleLabel when key is empty): the label's value when it is a
// known role, "" (both) when the label is absent or unknown; ok is false
// for an unknown value, which a caller counts or logs. llm-d's other
// values of its role label are read as its role filters read them:
// prefill-decode (the successor of both) and encode-prefill-decode as
// RoleBoth, encode-prefill as RolePrefill. Its encode, a worker that
// neither prefills nor decodes, has no role here: it is an unknown value
// to this function, and Kubernetes discovery leaves such pods out.
func RoleFromLabels(labels map[string]string, key string) (role string, ok bool) {
	if key == "" {
		key = DefaultRoleLabel
	}
	v, has := labels[key]
	if !has {
		return "", true
	}
	switch v {
	case "prefill-decode", "encode-prefill-decode":
		return RoleBoth, true
	case "encode-prefill":
		return RolePrefill, true
	}
	if ValidRole(v) != nil {
		return "", false
	}
	return v, true
}

// Decodes reports whether e may be a request's decode endpoint: its role
// is RoleDecode, RoleBoth or none.
func Decodes(e kvroute.Endpoint) bool { return e.Role != RolePrefill }

// Prefills reports whether e may prefill another endpoint's request: its
// role is RolePrefill, RoleBoth or none.
func Prefills(e kvroute.Endpoint) bool { return e.Role != RoleDecode }
