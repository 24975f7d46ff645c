package gateway

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/session"
)

// A NewServer that fails after it built its Handler, here because its
// listen address is taken, closes the Handler too: the upstream pool's
// connections and warm-ahead dials to the endpoints it was given end with
// it, as they do when a running Server shuts down.
func TestNewServerFailingToListenClosesWhatItBuilt(t *testing.T) {
	defer leakcheck.Check(t)()
	u := newUpstream(t)
	defer u.Close()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	cfg := testServerConfig(kvroute.Endpoint{ID: u.id})
	cfg.Listen = taken.Addr().String()
	_, err = NewServer(t.Context(), cfg, Options{})
	require.ErrorContains(t, err, "address already in use")
}

// A buildRouter that fails after it built the engine-metrics scraper (its
// loop runs and its metrics are registered), here in building the session
// affinity or in kvroute.New, closes the scraper (closeComponents, through
// closeAdmission): its loop ends and its metrics leave the registry.
func TestBuildRouterFailingClosesTheScraper(t *testing.T) {
	for name, c := range map[string]struct {
		mutate func(*ServerConfig)
		want   string
	}{
		"components": {func(cfg *ServerConfig) { cfg.Session = &session.Config{TTL: -time.Second} }, "ttl must be >= 0"},
		"router":     {func(cfg *ServerConfig) { cfg.Router.Model = "" }, "model is required"},
	} {
		t.Run(name, func(t *testing.T) {
			defer leakcheck.Check(t)()
			cfg := testServerConfig()
			cfg.EngineMetrics = &enginemetrics.Config{}
			cfg.Admission = &admission.Config{}
			c.mutate(&cfg)
			s := &Server{registry: prometheus.NewRegistry()}
			require.ErrorContains(t, s.buildRouter(t.Context(), &cfg, Options{}), c.want)
			require.NotNil(t, s.scraper, "the scraper was built before the failure")
			mfs, err := s.registry.Gather()
			require.NoError(t, err)
			for _, mf := range mfs {
				require.False(t, strings.HasPrefix(mf.GetName(), "kvroute_engine_metrics_"), "%s left registered", mf.GetName())
			}
		})
	}
}
