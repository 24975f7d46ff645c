package extproc

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/recent"
)

// TestRecentCutsRequestTexts sends a stream whose x-request-id and model
// name are far over recent.MaxText (the router refuses the ID): the status
// page's record keeps at most recent.MaxText bytes of each, cut at a UTF-8
// boundary, and the cut is counted once for the stream.
func TestRecentCutsRequestTexts(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	id := strings.Repeat("r", 4<<10)
	model := "a" + strings.Repeat("é", 64<<10) // 2-byte runes from an odd offset
	st, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	require.NoError(t, st.Send(envoyHeadersID("/v1/completions", false, nil, id)))
	require.NoError(t, st.Send(bodyChunk(fmt.Sprintf(`{"model":%q,"prompt":"hello","max_tokens":4}`, model), true)))
	answers, _ := drain(t, st)
	require.NotEmpty(t, answers)

	// The picker records a stream when it ends.
	require.Eventually(t, func() bool { return len(h.picker.recent.List()) == 1 }, wait, time.Millisecond)
	rec := h.picker.recent.List()[0]
	require.Equal(t, id[:recent.MaxText], rec.RequestID)
	require.True(t, utf8.ValidString(rec.Model))
	require.True(t, strings.HasPrefix(model, rec.Model))
	require.Equal(t, recent.MaxText-1, len(rec.Model), "cut before the rune the bound splits")
	require.Equal(t, "/v1/completions", rec.Path)
	require.Equal(t, 1.0, h.counter("kvroute_extproc_status_truncated_total", nil))
}

// TestRecentCutsEnvoyTexts checks the bound on the path and the served
// endpoint, which come from Envoy's headers and metadata, and that short
// texts are kept whole and not counted.
func TestRecentCutsEnvoyTexts(t *testing.T) {
	path := streamRecord{Path: "/" + strings.Repeat("p", 4<<10)}
	require.True(t, clipRecord(&path))
	require.Len(t, path.Path, recent.MaxText)
	served := streamRecord{Served: strings.Repeat("s", 4<<10)}
	require.True(t, clipRecord(&served))
	require.Len(t, served.Served, recent.MaxText)
	short := streamRecord{RequestID: "id", Path: "/v1/completions", Model: testModel, Served: "10.0.0.1:8000"}
	require.False(t, clipRecord(&short))
	require.Equal(t, streamRecord{RequestID: "id", Path: "/v1/completions", Model: testModel, Served: "10.0.0.1:8000"}, short)
}
