package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPriorityAsVLLMReadsAnInt: vLLM's completions and chat completions
// models read priority as a lax int and their render copies it into the
// GenerateRequest. The simulated engine's render echoed any priority it
// could not read as an int64 as 0 (null, 1.5, "abc", true, a large
// integer) and served the request, where vLLM answers 400 or echoes the
// integer it read; the generation routes served them all.
func TestPriorityAsVLLMReadsAnInt(t *testing.T) {
	_, base := startServer(t, Config{EnableScaleOut: true})
	routes := validatedRoutes
	for in, echo := range map[string]string{
		`3`: `3`, `-2`: `-2`, `1.0`: `1`, `1e3`: `1000`, `"7"`: `7`, `" 8 "`: `8`, `"2.00"`: `2`, `"-0"`: `0`,
		`true`: `1`, `false`: `0`, `12345678901234567890123`: `12345678901234567890123`,
	} {
		for _, r := range routes {
			body := "{" + r.head + `,"priority":` + in + "}"
			code, got := post(t, base+r.path, json.RawMessage(body))
			require.Equal(t, http.StatusOK, code, "%s %s: %s", r.path, body, got)
			if !strings.HasSuffix(r.path, "/render") {
				continue
			}
			var g struct {
				Priority json.RawMessage `json:"priority"`
			}
			if r.path == "/v1/completions/render" {
				g = decode[[]struct {
					Priority json.RawMessage `json:"priority"`
				}](t, got)[0]
			} else {
				require.NoError(t, json.Unmarshal(got, &g))
			}
			require.Equal(t, echo, string(g.Priority), "%s %s", r.path, body)
		}
	}
	limit := strings.Repeat("9", maxIntDigits)
	for in, echo := range map[string]string{limit: limit, "-" + limit: "-" + limit, `"00` + limit + `"`: limit} {
		code, got := post(t, base+"/v1/completions/render", json.RawMessage("{"+completionHead+`,"priority":`+in+"}"))
		require.Equal(t, http.StatusOK, code, string(got))
		require.Equal(t, echo, string(decode[[]struct {
			Priority json.RawMessage `json:"priority"`
		}](t, got)[0].Priority))
	}
	// Python's json.loads and pydantic refuse an integer past 4300 digits.
	past, long := "1"+limit, `"`+strings.Repeat("7", 1<<20)+`"`
	for _, in := range []string{`null`, `1.5`, `1e400`, `"abc"`, `""`, `"1.5"`, `"1_0"`, `"+-1"`, `[1]`, `{}`, past, "-" + past, `"` + past + `"`, long} {
		for _, r := range routes {
			body := "{" + r.head + `,"priority":` + in + "}"
			code, got := post(t, base+r.path, json.RawMessage(body))
			require.Equal(t, http.StatusBadRequest, code, "%s %.80s: %s", r.path, body, got)
			var e errorBody
			require.NoError(t, json.Unmarshal(got, &e), string(got))
			require.Equal(t, "BadRequestError", e.Error.Type)
			require.Contains(t, e.Error.Message, "priority", string(got))
		}
	}
}
