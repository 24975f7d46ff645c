package gateway

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/models"
)

// The models poller's re-annotation of the endpoints (a change of served
// models) never brings back an endpoint list that SetEndpoints has
// replaced meanwhile: whichever runs last, the gateway ends up with the
// endpoints last given. Before, the re-annotation read the list, let go
// of the lock, and handed the list it read to SetEndpoints: a
// SetEndpoints in between was undone, the old list kept until discovery
// changed again. The race is run a thousand times, four re-annotations
// beside each SetEndpoints: before, it lost within a few hundred rounds.
func TestReannotateNeverRestoresReplacedEndpoints(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after every other cleanup
	cfg := kvroute.DefaultConfig()
	cfg.Model = "alpha"
	older := []kvroute.Endpoint{{ID: "127.0.0.1:1"}, {ID: "127.0.0.1:2"}}
	newer := []kvroute.Endpoint{{ID: "127.0.0.1:3"}}
	gw, err := NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: cfg, Endpoints: older,
		Models: &models.Config{Served: map[string][]string{"127.0.0.1:1": {"alpha"}}}}, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, gw.Shutdown(context.Background())) })

	for i := range 1000 {
		require.NoError(t, gw.SetEndpoints(older))
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(gw.reannotate) // what the poller's OnChange runs
		}
		wg.Go(func() { require.NoError(t, gw.SetEndpoints(newer)) })
		wg.Wait()
		got := gw.Handler().Endpoints()
		require.Len(t, got, 1, "round %d: the replaced endpoints came back", i)
		require.Equal(t, "127.0.0.1:3", got[0].ID, "round %d", i)
	}
}
