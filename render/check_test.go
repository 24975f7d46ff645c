package render

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/testport"
)

// The servers are closed by the subtest's cleanup, before the leak check.
func TestCheckReportsPerEndpointAndLeaksNothing(t *testing.T) {
	defer leakcheck.Check(t)()
	t.Run("check", testCheckReportsPerEndpoint)
}

func testCheckReportsPerEndpoint(t *testing.T) {
	ok := newFakeVLLM(t, "ok")
	disabled := newFakeVLLM(t, "disabled")
	disabled.on("/v1/completions/render", func(w http.ResponseWriter, r *http.Request) { notFound(w) })
	otherModel := newFakeVLLM(t, "other")
	otherModel.on("/v1/completions/render", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, 404, "NotFoundError", "The model `qwen3-8b` does not exist.")
	})
	dead := "http://" + testport.Addr(t) // nothing listens, nor takes the port meanwhile

	eps := []Endpoint{
		{ID: "10.0.0.1:8000", URL: ok.URL},
		{ID: "10.0.0.2:8000", URL: disabled.URL},
		{ID: "10.0.0.3:8000", URL: otherModel.URL},
		{ID: "10.0.0.4:8000", URL: dead},
		{ID: "10.0.0.5:8000", URL: "not a url"},
	}
	results, err := Check(context.Background(), eps, CheckOptions{Model: "qwen3-8b", Authorization: "Bearer k"})
	require.Error(t, err)
	require.Contains(t, err.Error(), "4 of 5")
	require.Len(t, results, 5)

	require.True(t, results[0].OK())
	require.Equal(t, len(textTokens("Hello, world!")), results[0].Tokens)
	require.Contains(t, results[0].String(), "ok   10.0.0.1:8000")
	rec := ok.last()
	require.Equal(t, "/v1/completions/render", rec.Path)
	require.Equal(t, "Bearer k", rec.Header.Get("Authorization"))
	require.JSONEq(t, `{"model":"qwen3-8b","prompt":"Hello, world!","max_tokens":1}`, string(rec.Body))

	require.ErrorIs(t, results[1].Err, ErrRenderNotEnabled)
	require.Contains(t, results[1].String(), "--enable-scale-out")
	require.ErrorIs(t, results[2].Err, ErrModelNotFound)
	require.Equal(t, ReasonConnection, asError(t, results[3].Err).Reason)
	require.Error(t, results[4].Err)
	require.Equal(t, 1, disabled.hits(""), "no retry")

	results, err = Check(context.Background(), eps[:1], CheckOptions{Model: "qwen3-8b"})
	require.NoError(t, err)
	require.True(t, results[0].OK())

	_, err = Check(context.Background(), eps, CheckOptions{})
	require.ErrorContains(t, err, "model name is required")
}
