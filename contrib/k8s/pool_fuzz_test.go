package k8s

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// FuzzDecodeInferencePool feeds arbitrary InferencePool objects, as the
// API server would hand them to the informer, to DecodeInferencePool (seed
// corpus in testdata/fuzz/FuzzDecodeInferencePool): it never panics; a
// pool it accepts has a non-empty selector of valid label names and
// values, which selects exactly the pods with those labels, and at least
// one target port, each in 1..65535 and none twice (a port given twice
// would give two endpoints one ID).
func FuzzDecodeInferencePool(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"inference.networking.k8s.io/v1","kind":"InferencePool","metadata":{"name":"p","namespace":"ns"},` +
			`"spec":{"selector":{"matchLabels":{"app":"vllm"}},"targetPorts":[{"number":8000},{"number":8001}]}}`,
		`{"apiVersion":"inference.networking.x-k8s.io/v1alpha2","kind":"InferencePool","metadata":{"name":"p"},` +
			`"spec":{"selector":{"app":"vllm"},"targetPortNumber":8000}}`,
		`{"apiVersion":"v1","kind":"InferencePool","spec":{"selector":{"matchLabels":{"app":"x"}},"targetPorts":[{"number":8000},{"number":8000}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return
		}
		p, err := DecodeInferencePool(u)
		if err != nil {
			return
		}
		if len(p.Selector) == 0 {
			t.Fatalf("%s: accepted an empty selector", data)
		}
		if _, err := labels.ValidatedSelectorFromSet(p.Selector); err != nil {
			t.Fatalf("%s: accepted the selector %v: %v", data, p.Selector, err)
		}
		if len(p.TargetPorts) == 0 {
			t.Fatalf("%s: accepted without a target port", data)
		}
		seen := map[int32]bool{}
		for _, port := range p.TargetPorts {
			if port < 1 || port > 65535 || seen[port] {
				t.Fatalf("%s: target ports %v", data, p.TargetPorts)
			}
			seen[port] = true
		}
	})
}
