package gateway

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/session"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

// With P/D on, the decode pick replaces the router's one-role pick, so the
// gateway hands session affinity's scorer to it as well: a conversation's
// later turns stay on the decode endpoint of its first, where without the
// session the decode pick's tie-break (the earlier decode candidate) would
// move them once the endpoint order changes. KV events and speculative
// entries are off, so nothing but the session says where a turn went; the
// decider's threshold keeps every prompt local, so no transfer is needed.
func TestGatewaySessionKeepsItsDecodeEndpoint(t *testing.T) {
	defer leakcheck.Check(t)()
	f := &tokenFleet{client: &http.Client{Transport: &http.Transport{}}}
	roles := []string{disagg.RoleDecode, disagg.RoleDecode, disagg.RolePrefill}
	var eps []kvroute.Endpoint
	for _, role := range roles {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		srv, err := server.New(server.Config{Model: testModel, EnableScaleOut: true,
			Engine: simengine.Config{BlockSize: 16, NumGPUBlocks: 512, PrefillTokensPerSecond: 1e7, DecodeStep: time.Millisecond}}, server.Options{})
		require.NoError(t, err)
		ch := make(chan error, 1)
		go func() { ch <- srv.Serve(ln) }()
		f.engines, f.served = append(f.engines, srv), append(f.served, ch)
		eps = append(eps, kvroute.Endpoint{ID: ln.Addr().String(), Role: role})
	}
	cfg := kvroute.DefaultConfig()
	cfg.Model = testModel
	cfg.BlockSize = 16
	cfg.Events.Enabled = new(false)
	cfg.Speculative.Enabled = new(false)
	var err error
	f.gw, err = NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: cfg, Endpoints: eps,
		Session: &session.Config{}, Disagg: &disagg.Config{NonCachedTokens: 1 << 30}}, Options{})
	require.NoError(t, err)
	defer f.close(t)

	hdr := http.Header{"X-Session-Id": {"conv-a"}}
	home, code := chatTurn(t, f, hdr, "conv-a", 0)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, eps[0].ID, home, "idle decoders alike: the first decode candidate")

	// The decode endpoints swap places: a request without a session now
	// goes to the other decoder, the session's next turns stay home.
	require.NoError(t, f.gw.SetEndpoints([]kvroute.Endpoint{eps[1], eps[0], eps[2]}))
	other, code := chatTurn(t, f, http.Header{}, "no-session", 0)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, eps[1].ID, other, "the tie-break follows the new order")
	for k := 1; k < 4; k++ {
		ep, code := chatTurn(t, f, hdr, "conv-a", k)
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, home, ep, "turn %d", k)
	}
	require.Contains(t, metricsText(t, f), `kvroute_session_lookups_total{outcome="hit"} 3`)
}
