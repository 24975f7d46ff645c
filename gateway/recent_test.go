package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/recent"
)

// TestRecentCutsClientTexts sends a routed request whose model name (as a
// LoRA adapter) is far over recent.MaxText: the status page's record keeps
// at most recent.MaxText bytes of it, cut at a UTF-8 boundary, and the cut
// is counted; the longest request ID the router accepts is kept whole, as
// are the texts of a later request, which is not counted.
func TestRecentCutsClientTexts(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{})
	defer h.close()
	model := "a" + strings.Repeat("é", 64<<10) // 2-byte runes from an odd offset
	id := strings.Repeat("r", recent.MaxText)
	b, err := json.Marshal(map[string]any{"model": model, "prompt": "hello", "max_tokens": 8})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, h.gw.URL+"/v1/completions", strings.NewReader(string(b)))
	require.NoError(t, err)
	req.Header.Set(headerRequestID, id)
	resp, err := h.client.Do(req)
	require.NoError(t, err)
	got := readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, got)

	// The handler records a request after its response is out.
	require.Eventually(t, func() bool {
		return len(h.handler.Recent()) == 1 && metricValue(t, h.reg, "kvroute_gateway_status_truncated_total") == 1
	}, time.Minute, time.Millisecond)
	rec := h.handler.Recent()
	require.Equal(t, id, rec[0].RequestID)
	require.True(t, utf8.ValidString(rec[0].Model))
	require.True(t, strings.HasPrefix(model, rec[0].Model))
	require.Equal(t, recent.MaxText-1, len(rec[0].Model), "cut before the rune the bound splits")
	require.True(t, rec[0].LoRA)

	resp = h.post("/v1/completions", completionsBody("hello again", false))
	got = readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, got)
	require.Eventually(t, func() bool { return len(h.handler.Recent()) == 2 }, time.Minute, time.Millisecond)
	rec = h.handler.Recent()
	require.Equal(t, testModel, rec[0].Model)
	require.Equal(t, 1.0, metricValue(t, h.reg, "kvroute_gateway_status_truncated_total"))
}

// TestRecentCutsRequestID checks the request ID's bound, which a Picker
// other than the Router (whose request table refuses longer IDs) lets
// through.
func TestRecentCutsRequestID(t *testing.T) {
	long := DecisionRecord{RequestID: strings.Repeat("r", 4<<10), Model: testModel}
	require.True(t, clipRecord(&long))
	require.Equal(t, strings.Repeat("r", recent.MaxText), long.RequestID)
	require.Equal(t, testModel, long.Model)
	short := DecisionRecord{RequestID: "short", Model: testModel}
	require.False(t, clipRecord(&short))
	require.Equal(t, "short", short.RequestID)
}
