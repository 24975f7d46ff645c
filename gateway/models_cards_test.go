package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/models"
)

// The gateway's GET /v1/models lists each card as vLLM's ModelCard: a
// permission list of one ModelPermission with vLLM's fixed values and a
// fresh "modelperm-" ID, and, for an alias the rewrite table sends to a
// LoRA adapter, the adapter's base model as parent, as vLLM lists that
// adapter (the alias is routed as it). The permission list used to be
// empty, and the alias's parent null.
func TestGatewayModelCardsAreVLLMs(t *testing.T) {
	defer leakcheck.Check(t)()
	u := newUpstream(t)
	defer u.Close()
	cfg := testServerConfig(kvroute.Endpoint{ID: u.id})
	cfg.Router.Model = "alpha"
	cfg.Models = &models.Config{Served: map[string][]string{u.id: {"alpha", "sql"}},
		Adapters: map[string]string{"sql": "alpha"},
		Rewrites: []models.Rule{{Model: "db", Targets: []models.Target{{Model: "sql"}}}, {Model: "chat", Targets: []models.Target{{Model: "alpha"}}}}}
	srv, err := NewServer(t.Context(), cfg, Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, srv.Shutdown(context.Background())) }()
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()

	list := gatewayModelList(t, c, srv.URL())
	require.Len(t, list, 4)
	permID := regexp.MustCompile(`^modelperm-[0-9a-f]{32}$`)
	seen := map[string]bool{}
	for id, card := range list {
		perms, ok := card["permission"].([]any)
		require.True(t, ok, id)
		require.Len(t, perms, 1, "%s: vLLM gives each card one ModelPermission", id)
		p := perms[0].(map[string]any)
		pid, _ := p["id"].(string)
		require.Regexp(t, permID, pid, id)
		require.False(t, seen[pid], "%s: a fresh ID per card", id)
		seen[pid] = true
		require.Equal(t, card["created"], p["created"], id)
		delete(p, "id")
		delete(p, "created")
		require.Equal(t, map[string]any{"object": "model_permission", "allow_create_engine": false, "allow_sampling": true,
			"allow_logprobs": true, "allow_search_indices": false, "allow_view": true, "allow_fine_tuning": false,
			"organization": "*", "group": nil, "is_blocking": false}, p, id)
	}
	require.Equal(t, "alpha", list["sql"]["parent"])
	require.Equal(t, "alpha", list["db"]["parent"], "an alias of an adapter has the adapter's parent")
	require.Nil(t, list["chat"]["parent"], "an alias of a base model has none")
	require.Nil(t, list["alpha"]["parent"])
	code, _, _, body := postModel(t, c, srv.URL(), "db")
	require.Equal(t, http.StatusOK, code, body)
	bodies, _ := u.received()
	require.Len(t, bodies, 1)
	var sent map[string]any
	require.NoError(t, json.Unmarshal(bodies[0], &sent))
	require.Equal(t, "sql", sent["model"], "db is sent as sql")
}
