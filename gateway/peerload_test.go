package gateway

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

// With PeerLoadFromMetrics, requests another gateway replica (here: a
// client going to the engine directly) holds on an engine show in this
// gateway's load view as its peers' share, from the engine's scraped
// queue, and steer its next pick to the other engine; once they end, the
// share goes back to zero.
func TestGatewayPeerLoadFromMetrics(t *testing.T) {
	defer leakcheck.Check(t)()
	var engines []*server.Server
	var eps []kvroute.Endpoint
	for range 2 {
		srv, err := server.New(server.Config{Model: testModel,
			Engine: simengine.Config{BlockSize: 64, NumGPUBlocks: 512, PrefillTokensPerSecond: 1e7, DecodeStep: 20 * time.Millisecond}}, server.Options{})
		require.NoError(t, err)
		require.NoError(t, srv.Start("127.0.0.1:0"))
		engines = append(engines, srv)
		eps = append(eps, kvroute.Endpoint{ID: srv.Addr()})
	}
	defer func() {
		for _, e := range engines {
			require.NoError(t, e.Close())
		}
	}()
	rc := kvroute.DefaultConfig()
	rc.Model = testModel
	rc.Events.Enabled = new(false)
	rc.DisableRender = true
	gw, err := NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: rc, Endpoints: eps, PeerLoadFromMetrics: true,
		// A loaded machine must not make a scrape fail or go stale.
		EngineMetrics: &enginemetrics.Config{Interval: 10 * time.Millisecond, Staleness: time.Hour, Timeout: time.Hour}}, Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, gw.Shutdown(context.Background())) }()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	// Three long requests on engine 0, sent around the gateway.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"model":%q,"prompt":"another replica's request %d","max_tokens":4000}`, testModel, i)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+eps[0].ID+"/v1/completions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if resp, err := client.Do(req); err == nil {
				_ = resp.Body.Close()
			}
		}()
	}
	load := gw.Router().Load()
	require.Eventually(t, func() bool {
		return load.PeerLoadOf(eps[0].ID).Requests == 3 && load.PeerLoadOf(eps[1].ID).Requests == 0
	}, 20*time.Second, 5*time.Millisecond, "the engine's queue shows in the peers' share (scraped every 10ms)")

	resp, err := client.Post(gw.URL()+"/v1/completions", "application/json",
		strings.NewReader(fmt.Sprintf(`{"model":%q,"prompt":"this gateway's request","max_tokens":1}`, testModel)))
	require.NoError(t, err)
	body := readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, eps[1].ID, resp.Header.Get(HeaderEndpoint), "routed away from the engine the peers load")

	cancel()
	wg.Wait()
	require.Eventually(t, func() bool { return load.PeerLoadOf(eps[0].ID).Requests == 0 }, 20*time.Second, 5*time.Millisecond,
		"aborted at the engine, they leave its queue and the peers' share")
}

func TestPeerLoadFromMetricsConfig(t *testing.T) {
	rc := kvroute.DefaultConfig()
	rc.Model = testModel
	rc.Events.Enabled = new(false)
	rc.DisableRender = true
	rc.Cluster.Addrs = []string{"127.0.0.1:1"}
	_, err := NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: rc, PeerLoadFromMetrics: true}, Options{})
	require.ErrorContains(t, err, "peerLoadFromMetrics estimates what a cluster shares exactly")
	_, err = NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Policy: PolicyRoundRobin, PeerLoadFromMetrics: true}, Options{})
	require.ErrorContains(t, err, "peerLoadFromMetrics needs the precise policy")
}
