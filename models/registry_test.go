package models

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
)

// Serves applies the Router's rule to a request without a model: it asks
// for the base model, which an endpoint without Models serves and an
// endpoint listing models serves only when it lists the base.
func TestServesTakesAnEmptyModelAsTheBase(t *testing.T) {
	bare := []kvroute.Endpoint{{ID: "10.0.0.1:8000"}}
	require.True(t, Serves(bare, "", "llama"), "an endpoint without Models serves the base model, named or not")
	require.True(t, Serves(bare, "llama", "llama"))
	listing := []kvroute.Endpoint{{ID: "10.0.0.2:8000", Models: []string{"qwen"}}}
	require.False(t, Serves(listing, "", "llama"), "the base model is not among its models")
	require.True(t, Serves(listing, "", "qwen"))
	require.False(t, Serves(nil, "", "llama"))
}
