package gateway

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/models"
)

// kvroute_models_rewrites_total counts the requests whose model was
// rewritten: a request for a rewrite whose drawn target no endpoint serves
// is answered 404 with nothing rewritten or routed, and is not counted; a
// request for one whose target is served is rewritten, routed and counted
// once. The 404 used to be counted as a rewrite of its model to the target.
func TestGatewayCountsOnlyTheRewritesItRoutes(t *testing.T) {
	defer leakcheck.Check(t)()
	u := newUpstream(t)
	defer u.Close()
	cfg := testServerConfig(kvroute.Endpoint{ID: u.id})
	cfg.Router.Model = "alpha"
	cfg.Models = &models.Config{Served: map[string][]string{u.id: {"alpha"}},
		Rewrites: []models.Rule{
			{Model: "alias", Targets: []models.Target{{Model: "alpha"}}},
			{Model: "ghost", Targets: []models.Target{{Model: "gone"}}},
		}}
	srv, err := NewServer(t.Context(), cfg, Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, srv.Shutdown(context.Background())) }()
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()

	code, _, _, body := postModel(t, c, srv.URL(), "ghost")
	require.Equal(t, http.StatusNotFound, code, body)
	require.Zero(t, rewrites(t, srv.Registry(), "ghost", "gone"), "a 404 rewrites nothing")
	got, _ := u.received()
	require.Empty(t, got, "nothing routed")

	code, ep, _, body := postModel(t, c, srv.URL(), "alias")
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, u.id, ep)
	got, _ = u.received()
	require.Len(t, got, 1)
	require.Contains(t, string(got[0]), `"model":"alpha"`)
	require.Equal(t, 1.0, rewrites(t, srv.Registry(), "alias", "alpha"))
	require.Zero(t, rewrites(t, srv.Registry(), "ghost", "gone"))
}

// A rewrite whose target the gateway's listing deems served but the Router
// refuses (kvroute.ErrModelMismatch, answered 404: here the gateway's base
// model, which an endpoint listing no models serves for the gateway, is
// not the Router's) sends nothing as the target and is not counted.
func TestGatewayDoesNotCountARewriteThePickRefuses(t *testing.T) {
	defer leakcheck.Check(t)()
	u := newUpstream(t)
	defer u.Close()
	const other = "127.0.0.1:1" // lists a model of its own; never sent anything
	cfg := testServerConfig(kvroute.Endpoint{ID: u.id}, kvroute.Endpoint{ID: other})
	cfg.Router.Model = "alpha"
	cfg.Proxy.Model = "beta"
	cfg.Models = &models.Config{Served: map[string][]string{other: {"gamma"}},
		Rewrites: []models.Rule{{Model: "alias", Targets: []models.Target{{Model: "beta"}}}}}
	srv, err := NewServer(t.Context(), cfg, Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, srv.Shutdown(context.Background())) }()
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()

	code, _, _, body := postModel(t, c, srv.URL(), "alias")
	require.Equal(t, http.StatusNotFound, code, body)
	require.Contains(t, body, kvroute.ErrModelMismatch.Error())
	got, _ := u.received()
	require.Empty(t, got, "nothing routed")
	require.Zero(t, rewrites(t, srv.Registry(), "alias", "beta"), "the refused request was not sent as the target")
}
