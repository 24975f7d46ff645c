package k8s

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/models"
)

// A pod's models annotation becomes its endpoints' Models (every rank);
// invalid and repeated names are left out, a problem of the annotation
// (blanks between commas are no names); a change of the list is a change
// of the endpoint.
func TestPodModelsAnnotationFillsEndpointModels(t *testing.T) {
	p := pod("a", "10.0.0.1", map[string]string{"app": "vllm"}, true)
	p.Annotations = map[string]string{models.DefaultLabel: "meta-llama/Llama-3.1-8B, qwen/Qwen3-8B,,"}
	cfg := Config{ModelsAnnotation: models.DefaultLabel}
	var probs podProblems
	eps := podEndpoints(p, []int32{8000, 8001}, cfg, newPodWarnings(slog.New(slog.DiscardHandler)), &probs)
	require.Len(t, eps, 2)
	require.Equal(t, podProblems{}, probs, "blanks are no problem")
	for _, e := range eps {
		require.Equal(t, []string{"meta-llama/Llama-3.1-8B", "qwen/Qwen3-8B"}, e.Models)
	}
	other := eps[0]
	other.Models = []string{"meta-llama/Llama-3.1-8B"}
	require.False(t, endpointEqual(eps[0], other))
	none := podEndpoints(pod("b", "10.0.0.2", nil, true), []int32{8000}, cfg, newPodWarnings(slog.New(slog.DiscardHandler)), &probs)
	require.Equal(t, []kvroute.Endpoint{{ID: "10.0.0.2:8000", Labels: nil}}, none, "no annotation: the router's model")

	bad := pod("c", "10.0.0.3", nil, true)
	bad.Annotations = map[string]string{models.DefaultLabel: "ok,bad\x01name"}
	eps = podEndpoints(bad, []int32{8000}, cfg, newPodWarnings(slog.New(slog.DiscardHandler)), &probs)
	require.Equal(t, []string{"ok"}, eps[0].Models)
	require.Equal(t, podProblems{problemModelsAnnotation: true}, probs, "an invalid name left out is a problem")

	probs = podProblems{}
	rep := pod("d", "10.0.0.4", nil, true)
	rep.Annotations = map[string]string{models.DefaultLabel: "ok, ok"}
	eps = podEndpoints(rep, []int32{8000}, cfg, newPodWarnings(slog.New(slog.DiscardHandler)), &probs)
	require.Equal(t, []string{"ok"}, eps[0].Models)
	require.Equal(t, podProblems{problemModelsAnnotation: true}, probs, "a repeated name left out is a problem, as the poller counts it")
}
