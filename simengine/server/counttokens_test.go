package server

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// /v1/messages/count_tokens answers the Messages request's prompt length,
// the input_tokens /v1/messages reports for it, without max_tokens and
// without running anything; an unknown model is vLLM's 404 in Anthropic's
// shape.
func TestCountTokensIsTheMessagesPromptLength(t *testing.T) {
	s, base := startServer(t, Config{})
	msgs := []map[string]any{{"role": "user", "content": "hello there, how many tokens is this?"}}
	code, out := post(t, base+CountTokensPath, map[string]any{"model": "m", "messages": msgs, "system": "be brief"})
	require.Equal(t, http.StatusOK, code, "%s", out)
	n := decode[struct {
		InputTokens int `json:"input_tokens"`
	}](t, out).InputTokens
	require.Positive(t, n)
	st := s.Engine().Stats()
	require.Zero(t, st.PromptTokens+st.RequestSuccess+st.PrefixCacheQueries, "nothing ran")

	code, out = post(t, base+"/v1/messages", map[string]any{"model": "m", "max_tokens": 1, "messages": msgs, "system": "be brief"})
	require.Equal(t, http.StatusOK, code, "%s", out)
	require.Equal(t, n, decode[msgBody](t, out).Usage.InputTokens)

	code, out = post(t, base+CountTokensPath, map[string]any{"model": "nope", "messages": msgs})
	require.Equal(t, http.StatusNotFound, code, "%s", out)
	require.JSONEq(t, `{"type":"error","error":{"type":"NotFoundError","message":"The model `+"`nope`"+` does not exist."}}`, string(out))
}
