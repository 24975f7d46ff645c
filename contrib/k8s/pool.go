package k8s

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The InferencePool resources this package reads.
var (
	// PoolV1 is the Inference Extension's v1 InferencePool.
	PoolV1 = schema.GroupVersionResource{Group: "inference.networking.k8s.io", Version: "v1", Resource: "inferencepools"}
	// PoolV1Alpha2 is the older v1alpha2 InferencePool, still served by
	// clusters that installed the experimental CRDs.
	PoolV1Alpha2 = schema.GroupVersionResource{Group: "inference.networking.x-k8s.io", Version: "v1alpha2", Resource: "inferencepools"}
)

// InferencePool is the part of an InferencePool that endpoint discovery
// needs: which pods are members, and on which ports they serve.
type InferencePool struct {
	// Namespace and Name identify the pool.
	Namespace, Name string
	// Selector is the pool's label selector (matchLabels only, as the API
	// defines it).
	Selector map[string]string
	// TargetPorts are the ports the member pods serve inference on; the
	// index of a port is its data-parallel rank.
	TargetPorts []int32
}

// poolJSON is the wire shape of both API versions.
type poolJSON struct {
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		Selector    json.RawMessage `json:"selector"`
		TargetPorts []struct {
			Number int32 `json:"number"`
		} `json:"targetPorts"`
		TargetPortNumber int32 `json:"targetPortNumber"`
	} `json:"spec"`
}

// DecodeInferencePool reads an InferencePool from its unstructured form, in
// either API version. A pool without a valid selector, without a valid
// port or with a port given twice is an error: it would select every pod,
// none usefully, or give two endpoints one ID.
func DecodeInferencePool(u *unstructured.Unstructured) (InferencePool, error) {
	raw, err := u.MarshalJSON()
	if err != nil {
		return InferencePool{}, err
	}
	var pj poolJSON
	if err := json.Unmarshal(raw, &pj); err != nil {
		return InferencePool{}, fmt.Errorf("k8s: InferencePool %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	p := InferencePool{Namespace: pj.Metadata.Namespace, Name: pj.Metadata.Name}
	if len(pj.Spec.Selector) > 0 {
		var v1 struct {
			MatchLabels map[string]string `json:"matchLabels"`
		}
		if err := json.Unmarshal(pj.Spec.Selector, &v1); err == nil && v1.MatchLabels != nil {
			p.Selector = v1.MatchLabels
		} else {
			var flat map[string]string
			if err := json.Unmarshal(pj.Spec.Selector, &flat); err != nil {
				return InferencePool{}, fmt.Errorf("k8s: InferencePool %s/%s: spec.selector: %w", p.Namespace, p.Name, err)
			}
			p.Selector = flat
		}
	}
	if len(p.Selector) == 0 {
		return InferencePool{}, fmt.Errorf("k8s: InferencePool %s/%s has an empty selector", p.Namespace, p.Name)
	}
	if _, err := labels.ValidatedSelectorFromSet(p.Selector); err != nil {
		return InferencePool{}, fmt.Errorf("k8s: InferencePool %s/%s: spec.selector: %w", p.Namespace, p.Name, err)
	}
	for _, tp := range pj.Spec.TargetPorts {
		p.TargetPorts = append(p.TargetPorts, tp.Number)
	}
	if len(p.TargetPorts) == 0 && pj.Spec.TargetPortNumber != 0 {
		p.TargetPorts = []int32{pj.Spec.TargetPortNumber}
	}
	if len(p.TargetPorts) == 0 {
		return InferencePool{}, fmt.Errorf("k8s: InferencePool %s/%s has no target port", p.Namespace, p.Name)
	}
	seen := make(map[int32]bool, len(p.TargetPorts))
	for _, port := range p.TargetPorts {
		if port < 1 || port > 65535 {
			return InferencePool{}, fmt.Errorf("k8s: InferencePool %s/%s: target port %d out of range", p.Namespace, p.Name, port)
		}
		// A port given twice would give each pod two endpoints of one ID,
		// the later rank's taking the ID's event ports.
		if seen[port] {
			return InferencePool{}, fmt.Errorf("k8s: InferencePool %s/%s: target port %d given twice", p.Namespace, p.Name, port)
		}
		seen[port] = true
	}
	return p, nil
}
