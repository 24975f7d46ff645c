package k8s

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Defaults of Config.
const (
	DefaultDebounce             = 250 * time.Millisecond
	DefaultEventsPortAnnotation = "kvroute.io/kv-events-port"
	DefaultReplayPortAnnotation = "kvroute.io/kv-replay-port"
	DefaultMaxEndpoints         = 10_000
)

// Config says which pods are endpoints. Set Pool to follow an InferencePool,
// or Selector and TargetPorts for a plain set of pods (a render pool, or a
// fleet without the Inference Extension).
type Config struct {
	// Namespace is where the pool and its pods live. Required.
	Namespace string `json:"namespace"`
	// Pool is the name of the InferencePool to follow.
	Pool string `json:"pool"`
	// PoolVersion is "v1" (default, inference.networking.k8s.io) or
	// "v1alpha2" (inference.networking.x-k8s.io). It applies to Pool only:
	// set with a Selector it is refused rather than ignored.
	PoolVersion string `json:"poolVersion"`
	// Selector is a Kubernetes label selector ("app=vllm,tier in (a,b)"),
	// used when Pool is empty.
	Selector string `json:"selector"`
	// TargetPorts are the pods' inference ports, used when Pool is empty;
	// the index of a port is its data-parallel rank.
	TargetPorts []int32 `json:"targetPorts"`
	// EventsPortAnnotation and ReplayPortAnnotation name the pod annotations
	// that give the engine's KV-event PUB and replay ROUTER ports (rank 0;
	// rank r adds r). Empty means the defaults; a pod without them gets the
	// router's configured ports. Like ModelsAnnotation and RoleLabel, a
	// key set must be one Kubernetes takes on a pod (a qualified name).
	EventsPortAnnotation string `json:"eventsPortAnnotation"`
	ReplayPortAnnotation string `json:"replayPortAnnotation"`
	// ModelsAnnotation names the pod annotation listing the models the
	// pod's engine serves, comma-separated (kvroute.Endpoint.Models; an
	// annotation because label values cannot hold the "/" of most model
	// names). Empty means models.DefaultLabel; a pod without it serves the
	// router's model (or what the gateway's models block finds).
	ModelsAnnotation string `json:"modelsAnnotation"`
	// Debounce is how long changes are gathered before the endpoint set is
	// recomputed (a duration string). Default 250ms.
	Debounce time.Duration `json:"debounce"`
	// MaxEndpoints bounds the endpoint set. Whole pods are left out, never
	// some of one pod's data-parallel ranks: the pods are taken in the
	// order of their endpoint IDs until the next would pass the bound, and
	// the rest are counted (kvroute_k8s_discovery_endpoints_left_out,
	// kvroute_k8s_discovery_pods_left_out) and logged when what is left out
	// changes. Default 10,000.
	MaxEndpoints int `json:"maxEndpoints"`
	// RoleLabel is the pod label that gives an endpoint's prefill/decode
	// role (kvroute.Endpoint.Role: prefill, decode or both; see package
	// disagg). Empty means disagg.DefaultRoleLabel, llm-d's llm-d.ai/role.
	// A pod without it serves both roles; an unknown value is logged and
	// taken as both. llm-d's other values are read as its role filters
	// read them: prefill-decode and encode-prefill-decode as both,
	// encode-prefill as prefill, and a pod labelled encode (an encode-only
	// worker) is left out. A pod relabelled at run time changes role at
	// the next endpoint set.
	RoleLabel string `json:"roleLabel"`
}

// Validate reports the first mistake of c that New would refuse: a missing
// namespace, a negative debounce or maxEndpoints, a label or annotation key
// Kubernetes would not take on a pod (it would match no pod), a pool
// together with a selector or target ports, an unknown poolVersion, or,
// without a pool, a poolVersion (which would be ignored), a selector that
// does not parse or selects every pod, missing target ports, or a target
// port out of range or given twice. LoadConfig calls it, so a configuration file's mistake
// shows where the file is read.
func (c Config) Validate() error {
	_, _, err := c.check()
	return err
}

// check is Validate; it also returns what New follows: the InferencePool's
// resource when Pool is set, else the parsed selector.
func (c Config) check() (schema.GroupVersionResource, labels.Selector, error) {
	var gvr schema.GroupVersionResource
	switch {
	case c.Namespace == "":
		return gvr, nil, errors.New("k8s: config: a namespace is required")
	case c.Debounce < 0:
		return gvr, nil, fmt.Errorf("k8s: config: debounce %v is negative", c.Debounce)
	case c.MaxEndpoints < 0:
		return gvr, nil, fmt.Errorf("k8s: config: maxEndpoints %d is negative", c.MaxEndpoints)
	}
	if err := c.checkKeys(); err != nil {
		return gvr, nil, err
	}
	if c.Pool != "" {
		if c.Selector != "" || len(c.TargetPorts) > 0 {
			return gvr, nil, errors.New("k8s: config: set either pool or selector and targetPorts, not both")
		}
		switch c.PoolVersion {
		case "", "v1":
			return PoolV1, nil, nil
		case "v1alpha2":
			return PoolV1Alpha2, nil, nil
		}
		return gvr, nil, fmt.Errorf("k8s: config: unknown poolVersion %q (v1 or v1alpha2)", c.PoolVersion)
	}
	if c.PoolVersion != "" {
		return gvr, nil, fmt.Errorf("k8s: config: poolVersion applies to a pool, not to a selector: "+
			"set either pool and poolVersion or selector and targetPorts (poolVersion %q)", c.PoolVersion)
	}
	sel, err := labels.Parse(c.Selector)
	if err != nil {
		return gvr, nil, fmt.Errorf("k8s: config: selector: %w", err)
	}
	if sel.Empty() {
		return gvr, nil, errors.New("k8s: config: an empty selector would select every pod of the namespace")
	}
	if len(c.TargetPorts) == 0 {
		return gvr, nil, errors.New("k8s: config: targetPorts are required with a selector")
	}
	for i, p := range c.TargetPorts {
		if p < 1 || p > 65535 {
			return gvr, nil, fmt.Errorf("k8s: config: target port %d out of range", p)
		}
		if slices.Contains(c.TargetPorts[:i], p) {
			return gvr, nil, fmt.Errorf("k8s: config: target port %d given twice", p)
		}
	}
	return gvr, sel, nil
}

// checkKeys refuses a label or annotation key of c that is set but is not a
// Kubernetes qualified name (an optional DNS-subdomain prefix and "/", then
// a name of at most 63 characters): no pod can carry it, so it would match
// nothing and leave every pod at the defaults without a word. Annotation
// keys are checked as the API server checks them, without regard to case.
func (c Config) checkKeys() error {
	for _, k := range []struct {
		name, key  string
		annotation bool
	}{
		{"roleLabel", c.RoleLabel, false},
		{"eventsPortAnnotation", c.EventsPortAnnotation, true},
		{"replayPortAnnotation", c.ReplayPortAnnotation, true},
		{"modelsAnnotation", c.ModelsAnnotation, true},
	} {
		if k.key == "" {
			continue
		}
		key := k.key
		if k.annotation {
			key = strings.ToLower(key)
		}
		if msgs := validation.IsQualifiedName(key); len(msgs) > 0 {
			return fmt.Errorf("k8s: config: %s %q: %s", k.name, k.key, strings.Join(msgs, "; "))
		}
	}
	return nil
}
