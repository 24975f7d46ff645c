package usage

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/bytebudget"
)

func scan(sse bool, chunks ...string) (int, string) {
	u := &Scanner{SSE: sse}
	for _, c := range chunks {
		u.Write([]byte(c))
	}
	return u.Result()
}

func TestUsageScanner(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sse    bool
		chunks []string
		cached int
		result string
	}{
		{"json", false, []string{`{"id":"x","usage":{"prompt_tokens":300,"prompt_tokens_details":{"cached_tokens":256}}}`}, 256, Observed},
		{"json split", false, []string{`{"usage":{"prompt_tokens_details":{"cac`, `hed_tokens":64}}}`}, 64, Observed},
		{"json without details is 0", false, []string{`{"usage":{"prompt_tokens":10,"completion_tokens":2}}`}, 0, Observed},
		{"json null details is 0", false, []string{`{"usage":{"prompt_tokens":10,"prompt_tokens_details":null}}`}, 0, Observed},
		{"responses", false, []string{`{"object":"response","usage":{"input_tokens":80,"input_tokens_details":{"cached_tokens":64}}}`}, 64, Observed},
		{"anthropic", false, []string{`{"type":"message","usage":{"input_tokens":80,"cache_read_input_tokens":64}}`}, 64, Observed},
		{"json no usage", false, []string{`{"id":"x","choices":[]}`}, 0, Absent},
		{"json invalid", false, []string{`{"usage":`}, 0, Invalid},
		{"json too large", false, []string{`{"usage":{},"pad":"` + strings.Repeat("a", MaxBytes) + `"}`}, 0, TooLarge},
		{"sse final usage chunk", true, []string{
			"data: {\"choices\":[{\"text\":\"a\"}],\"usage\":null}\n\n",
			"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":200,\"prompt_tokens_details\":{\"cached_tokens\":1",
			"92}}}\n\ndata: [DONE]\n\n"}, 192, Observed},
		{"sse crlf", true, []string{"data: {\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":8}}}\r\n\r\n"}, 8, Observed},
		{"sse responses completed", true, []string{"event: response.completed\ndata: {\"response\":{\"usage\":{\"input_tokens_details\":{\"cached_tokens\":128}}}}\n\n"}, 128, Observed},
		{"sse without include_usage", true, []string{"data: {\"choices\":[{\"text\":\"a\"}]}\n\n", "data: [DONE]\n\n"}, 0, Absent},
		{"sse last line without newline", true, []string{"data: {\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":4}}}"}, 4, Observed},
		{"sse line too long", true, []string{"data: {\"x\":\"" + strings.Repeat("a", MaxBytes) + "\"}\n\n"}, 0, TooLarge},
		{"sse usage after a long line", true, []string{"data: {\"x\":\"" + strings.Repeat("a", MaxBytes) + "\"}\n\n",
			"data: {\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":4}}}\n\n"}, 4, Observed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cached, result := scan(tc.sse, tc.chunks...)
			require.Equal(t, tc.result, result)
			require.Equal(t, tc.cached, cached)
		})
	}
}

// A Scanner charges its buffer to the budget as it grows and gives it all
// back at the end; one that finds no room reads nothing more and reports
// NoRoom, holding nothing.
func TestScannerBudget(t *testing.T) {
	body := `{"pad":"` + strings.Repeat("a", 4000) + `","usage":{"prompt_tokens_details":{"cached_tokens":64}}}`
	var b bytebudget.Budget
	b.Limit = 1 << 20
	u := &Scanner{Budget: &b}
	for i := 0; i < len(body); i += 100 {
		u.Write([]byte(body[i:min(i+100, len(body))]))
		require.Equal(t, u.Held(), b.InUse())
		require.GreaterOrEqual(t, b.InUse(), int64(min(i+100, len(body))))
	}
	cached, result := u.Result()
	require.Equal(t, Observed, result)
	require.Equal(t, 64, cached)
	require.Zero(t, b.InUse(), "the buffer given back")
	u.Release()
	require.Zero(t, b.InUse(), "a second release gives back nothing more")

	b.Limit = 1024 // room for the first growths, not for the whole body
	for _, sse := range []bool{false, true} {
		resp := body
		if sse {
			resp = "data: " + body + "\n\ndata: [DONE]\n\n"
		}
		u = &Scanner{SSE: sse, Budget: &b}
		u.Write([]byte(resp))
		require.Zero(t, b.InUse(), "refused: nothing held")
		u.Write([]byte("data: {\"usage\":{}}\n"))
		cached, result = u.Result()
		require.Equal(t, NoRoom, result, "sse %v", sse)
		require.Zero(t, cached)
		require.Zero(t, b.InUse())
	}

	// An early end gives the buffer back too.
	u = &Scanner{Budget: &b}
	u.Write([]byte(`{"usage":`))
	require.NotZero(t, b.InUse())
	u.Release()
	require.Zero(t, b.InUse())
}
