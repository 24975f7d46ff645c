package k8s

import (
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Validate reports the first mistake of c that New would refuse: a missing
// namespace, a negative debounce or maxEndpoints, a pool together with a
// selector or target ports, an unknown poolVersion, or, without a pool, a
// selector that does not parse or selects every pod, missing target ports,
// or a target port out of range or given twice. LoadConfig calls it, so a
// configuration file's mistake shows where the file is read.
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
