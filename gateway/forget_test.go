package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

// An engine removed from the Handler's endpoints loses its connections at
// once: before, its idle (and warm-kept) connections stayed open until a
// request to it, which never came.
func TestSetEndpointsClosesARemovedEnginesConnections(t *testing.T) {
	defer leakcheck.Check(t)()
	engine := func() *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = io.WriteString(w, `{"choices":[{"text":"x"}]}`)
		}))
	}
	a, b := engine(), engine()
	defer a.Close()
	defer b.Close()
	hostA, hostB := strings.TrimPrefix(a.URL, "http://"), strings.TrimPrefix(b.URL, "http://")

	h, err := New(Config{}, new(RoundRobin), Options{})
	require.NoError(t, err)
	defer h.Close()
	h.SetEndpoints([]kvroute.Endpoint{{ID: hostA}, {ID: hostB}})
	gw := httptest.NewServer(h)
	defer gw.Close()
	for range 4 {
		resp, err := http.Post(gw.URL+"/v1/completions", "application/json", strings.NewReader(`{"model":"m","prompt":"hi"}`))
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	h.ownsTr.WaitWarmers()
	open := h.ownsTr.OpenConns()
	require.Positive(t, open[hostA])
	require.Positive(t, open[hostB])

	h.SetEndpoints([]kvroute.Endpoint{{ID: hostB}})
	require.Equal(t, map[string]int{hostB: open[hostB]}, h.ownsTr.OpenConns(), "engine A's connections are closed, B's kept")
}
