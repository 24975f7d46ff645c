package gateway

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/simengine/server"
)

// In exchange mode the prefill request goes to the prefill endpoint's
// Address, as the decode request goes to the decode endpoint's: a
// prefiller served behind a path prefix splits. Before, the gateway sent
// it to exchange.prefillerScheme and the Address's host:port alone, the
// prefix dropped, and every split fell back to a local prefill (status).
func TestExchangePrefillsAtTheEndpointAddress(t *testing.T) {
	defer leakcheck.Check(t)()
	dec := startRoleEngine(t, server.RoleDecode, server.PDConfig{}, false, 0)
	pre := startRoleEngine(t, server.RolePrefill, server.PDConfig{}, false, 0)
	defer dec.close(t)
	defer pre.close(t)
	front := newRecordingFront(http.StripPrefix("/engine", pre.srv.Handler()))
	defer front.Close()
	pep := pre.endpoint(disagg.RolePrefill)
	pep.Address = front.URL + "/engine/"
	f := startPDFleet(t, DisaggModeExchange, 0, []kvroute.Endpoint{dec.endpoint(disagg.RoleDecode), pep}, dec, pre)
	defer f.close(t)

	a := f.post(t, f.gw.URL(), words(41, 600))
	require.Equal(t, dec.id, a.decode)
	require.Empty(t, a.fallback, "the prefill step reached the prefiller")
	require.Equal(t, pre.id, a.prefill)
	require.Contains(t, front.paths(), "/engine/v1/completions")
}

// recordingFront is an HTTP server in front of an engine's handler that
// records the path of every request it passes on.
type recordingFront struct {
	*httptest.Server
	mu  sync.Mutex
	got []string
}

func newRecordingFront(h http.Handler) *recordingFront {
	f := &recordingFront{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.got = append(f.got, r.URL.Path)
		f.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	return f
}

// paths returns the paths passed on so far.
func (f *recordingFront) paths() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got)
}
