package envoysim_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/contrib/extproc/envoysim"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A negative Retries tries the first endpoint only, as 0 does, instead of
// failing the request.
func TestNegativeRetriesTriesTheFirstEndpoint(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after startProxy's cleanup
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	defer engine.Close()
	proxy := startProxy(t, envoysim.Config{Retries: -1}, &removingPicker{dest: engine.Listener.Addr().String()})
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	resp, err := client.Get(proxy.URL + "/v1/models")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, "ok", string(body))
}
