package extproc

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// The picker reads a body's model as vLLM does: by the exact name "model",
// a case variant being an unknown member vLLM ignores, and the last one
// when repeated.
func TestRequestModelReadsAsVLLM(t *testing.T) {
	for _, c := range []struct{ body, want, err string }{
		{body: `{"model":"a","prompt":"x"}`, want: "a"},
		{body: `{"Model":"lora-x","prompt":"x"}`, want: ""},
		{body: `{"model":"a","MODEL":"b"}`, want: "a"},
		{body: `{"MODEL":"b","model":"a"}`, want: "a"},
		{body: `{"model":"a","model":"b"}`, want: "b"},
		{body: `{"model":"a","model":null}`, want: ""},
		{body: `{"mod\u0065l":"e"}`, want: "e"},
		{body: `{"messages":[{"model":"nested"}]}`, want: ""},
		{body: `{"model":5}`, err: "model must be a string"},
		{body: `null`, err: "expected a JSON object"},
		{body: `{"model":"a"`, err: "invalid JSON"},
	} {
		got, err := requestModel([]byte(c.body))
		if c.err != "" {
			require.ErrorContains(t, err, c.err, c.body)
			continue
		}
		require.NoError(t, err, c.body)
		require.Equal(t, c.want, got, c.body)
	}
}

// A request naming an unknown model, then the served one under a name
// vLLM ignores, is the unknown model's: answered 404 as vLLM would, not
// routed as the served model's.
func TestCaseVariantModelIsNotTheModel(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	h.picker.cfg.Model = "" // the body's model is the request's model
	ir := immediateFor(t, h, nil, fmt.Sprintf(`{"model":"no-such-model","MODEL":%q,"prompt":"hi","max_tokens":1}`, testModel))
	require.EqualValues(t, http.StatusNotFound, ir.GetStatus().GetCode())
	var body map[string]map[string]any
	require.NoError(t, json.Unmarshal(ir.GetBody(), &body))
	require.Contains(t, body["error"]["message"], "no endpoint serves the request's model")
}
