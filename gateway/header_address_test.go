package gateway

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/disagg/sidecar"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/simengine/server"
)

// In header mode the prefiller header names the host:port of the prefill
// endpoint's Address, where its requests go, not its ID: the decode pod's
// sidecar prefills there. Before, the gateway sent the ID, and every split
// to a prefiller whose ID is not its address went elsewhere (or, an ID
// that is no host:port, fell back as bad_target).
func TestHeaderModeNamesThePrefillerAddress(t *testing.T) {
	defer leakcheck.Check(t)()
	dec := startRoleEngine(t, server.RoleDecode, server.PDConfig{}, true, 0)
	pre := startRoleEngine(t, server.RolePrefill, server.PDConfig{}, false, 0)
	defer dec.close(t)
	defer pre.close(t)
	front := newRecordingFront(pre.srv.Handler())
	defer front.Close()
	pep := pre.endpoint(disagg.RolePrefill)
	pep.Address = front.URL + "/"
	f := startPDFleet(t, DisaggModeHeader, 0, []kvroute.Endpoint{dec.endpoint(disagg.RoleDecode), pep}, dec, pre)
	defer f.close(t)

	a := f.post(t, f.gw.URL(), words(43, 600))
	require.Equal(t, dec.id, a.decode)
	require.Equal(t, pre.id, a.prefill, "the response names the prefill endpoint by its ID")
	f.requireIdle(t, []kvroute.Endpoint{dec.endpoint(disagg.RoleDecode), pep})
	require.Equal(t, 1.0, f.sidecarCounter(t, "kvroute_sidecar_requests_total", "outcome", sidecar.OutcomeSplit))
	require.Contains(t, front.paths(), "/v1/completions", "the sidecar prefilled at the endpoint's Address")
}
