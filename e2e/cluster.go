package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/checkpoint"
	"github.com/kvroute/kvroute/gateway"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
	"github.com/kvroute/kvroute/telemetry"
)

// simEngine is one simulated vLLM server of the demo.
type simEngine struct {
	srv    *server.Server
	id     string // ip:port of its HTTP port: its endpoint ID and KV-event topic identity
	url    string
	served chan error
}

// cluster is everything the demo runs in-process: the engines, a gateway
// with precise routing, a round-robin gateway for comparison, and the
// KV-event subscriptions feeding the precise router's index.
type cluster struct {
	model   string
	engines []*simEngine
	gw      *gateway.Server // precise prefix-cache routing
	rr      *gateway.Server // round-robin, cache-blind
	pool    *kvevents.Pool
	client  *http.Client
	gwCfg   gateway.ServerConfig // the precise gateway's configuration, for restarts
	log     *slog.Logger
	ckptDir string // holds the precise gateway's index checkpoint
}

// startCluster starts o.Engines simulated engines on free loopback ports
// (KV events with replay on free ports too), the two gateways, and the event
// subscriptions; it waits until every engine's event stream is connected.
func startCluster(ctx context.Context, o Options) (c *cluster, err error) {
	c = &cluster{model: o.Model, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	for range o.Engines {
		e, err := startEngine(o)
		if err != nil {
			return c, err
		}
		c.engines = append(c.engines, e)
	}
	eps := c.endpoints()

	cfg := kvroute.DefaultConfig()
	cfg.Model = o.Model
	cfg.BlockSize = o.BlockSize
	// Every engine runs on 127.0.0.1 with its own event ports, so each
	// endpoint names its sockets (on separate hosts the router derives them
	// from the endpoint's IP and the default ports 5556/5559).
	cfg.Events.Enabled = new(true)
	// The index checkpoint of step 4, written when the gateway stops.
	if c.ckptDir, err = os.MkdirTemp("", "kvroute-demo-"); err != nil {
		return c, err
	}
	cfg.Checkpoint = checkpoint.Config{Path: filepath.Join(c.ckptDir, "index.ckpt"), Interval: -1}
	c.gwCfg = gateway.ServerConfig{Listen: "127.0.0.1:0", Router: cfg, Endpoints: eps}
	c.log = o.Logger
	c.gw, err = gateway.NewServer(ctx, c.gwCfg, gateway.Options{Set: telemetry.Set{Logger: o.Logger}})
	if err != nil {
		return c, fmt.Errorf("precise gateway: %w", err)
	}
	// Restarts (steps 4 and 5) listen where it listens, so that the
	// address printed first stays the gateway's to the end (and with
	// --hold); see restartGateway.
	c.gwCfg.Listen = c.gw.Addr()
	c.rr, err = gateway.NewServer(ctx, gateway.ServerConfig{Listen: "127.0.0.1:0", Policy: gateway.PolicyRoundRobin,
		Proxy: gateway.Config{Model: o.Model}, Endpoints: eps}, gateway.Options{Set: telemetry.Set{Logger: o.Logger}})

	if err != nil {
		return c, fmt.Errorf("round-robin gateway: %w", err)
	}

	c.pool = c.gw.Router().Events()
	return c, c.waitSubscribed(ctx, 10*time.Second)
}

// startEngine starts one simulated vLLM: --enable-scale-out, KV events with
// the topic kv@<ip:port>@<model> on a free port and replay on another.
func startEngine(o Options) (*simEngine, error) { return startEngineRole(o, server.PDConfig{}) }

// startEngineRole is startEngine with a part in prefill/decode
// disaggregation (the zero PDConfig: role both).
func startEngineRole(o Options, pd server.PDConfig) (*simEngine, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	id := ln.Addr().String()
	replay, snap := "tcp://127.0.0.1:0", "tcp://127.0.0.1:0"
	srv, err := server.New(server.Config{
		Model:          o.Model,
		EnableScaleOut: true,
		Engine: simengine.Config{
			BlockSize:              o.BlockSize,
			NumGPUBlocks:           o.EngineBlocks,
			PrefillTokensPerSecond: o.PrefillTokensPerSecond,
			DecodeStep:             o.DecodeStep,
		},
		KVEvents: server.KVEventsConfig{
			EnableKVCacheEvents: true,
			Publisher:           "zmq",
			Endpoint:            "tcp://127.0.0.1:0",
			ReplayEndpoint:      &replay,
			SnapshotEndpoint:    &snap, // vLLM's KV-cache snapshots (step 5)
			BufferSteps:         o.ReplayBufferSteps,
			Topic:               "kv@" + id + "@" + o.Model,
		},
		PD: pd,
	}, server.Options{Logger: o.Logger})
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("simulated engine: %w", err)
	}
	e := &simEngine{srv: srv, id: id, url: "http://" + id, served: make(chan error, 1)}
	go func() { e.served <- srv.Serve(ln) }()
	return e, nil
}

// waitSubscribed waits until every engine's publisher has the router's
// subscriber, so that no event of the demo is published before anyone
// listens (replay would repair it, but the demo should not need to).
func (c *cluster) waitSubscribed(ctx context.Context, limit time.Duration) error {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ready := true
		for _, e := range c.engines {
			st, ok := c.pool.Status(e.id)
			if !ok || !st.Connected || e.srv.Publisher().Stats().Subscribed == 0 {
				ready = false
			}
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("the router did not connect to the engines' KV-event sockets within %v", limit)
		case <-tick.C:
		}
	}
}

// restartGateway starts the precise gateway again, after a step shut it
// down, with cfg (the step's variant of gwCfg) on the port it listened on.
// Should another socket have taken that port while the gateway was down, it
// listens on any free one instead and says so on w, since the address
// printed first is gone; gwCfg follows it for the next restart. Either way
// c.gw and c.pool are the new gateway's, or c.gw is nil on an error.
func (c *cluster) restartGateway(ctx context.Context, cfg gateway.ServerConfig, w io.Writer) error {
	opts := gateway.Options{Set: telemetry.Set{Logger: c.log}}
	gw, err := gateway.NewServer(ctx, cfg, opts)
	if errors.Is(err, syscall.EADDRINUSE) {
		cfg.Listen = "127.0.0.1:0"
		if gw, err = gateway.NewServer(ctx, cfg, opts); err == nil {
			fmt.Fprintf(w, "  (the gateway's port was taken while it was down: it now listens on %s)\n", gw.URL())
		}
	}
	c.gw = gw
	if err != nil {
		return fmt.Errorf("gateway restart: %w", err)
	}
	c.gwCfg.Listen = gw.Addr()
	c.pool = gw.Router().Events()
	return nil
}

func (c *cluster) endpoints() []kvroute.Endpoint {
	eps := make([]kvroute.Endpoint, len(c.engines))
	for i, e := range c.engines {
		eps[i] = kvroute.Endpoint{ID: e.id, EventsAddress: e.srv.KVEventsEndpoint(), ReplayAddress: e.srv.ReplayEndpoint(),
			SnapshotAddress: e.srv.SnapshotEndpoint()}
	}
	return eps
}

func (c *cluster) renderEndpoints() []render.Endpoint {
	eps := make([]render.Endpoint, len(c.engines))
	for i, e := range c.engines {
		eps[i] = render.Endpoint{ID: e.id, URL: e.url}
	}
	return eps
}

// scrapeEngines scrapes every engine's /metrics.
func (c *cluster) scrapeEngines(ctx context.Context) ([]Metrics, error) {
	out := make([]Metrics, len(c.engines))
	for i, e := range c.engines {
		m, err := Scrape(ctx, c.client, e.url)
		if err != nil {
			return nil, err
		}
		out[i] = m
	}
	return out, nil
}

// resetCaches empties every engine's prefix cache (POST /reset_prefix_cache;
// each engine publishes AllBlocksCleared) and waits until the router's index
// has dropped the engines' blocks.
func (c *cluster) resetCaches(ctx context.Context) error {
	for _, e := range c.engines {
		if err := post(ctx, c.client, e.url+"/reset_prefix_cache"); err != nil {
			return err
		}
	}
	ix := c.gw.Router().Index()
	deadline := time.Now().Add(5 * time.Second)
	for ix.Stats().Memberships > 0 && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// close stops the gateways (the precise one's router takes its event
// subscriptions down with it) and the engines.
func (c *cluster) close() error {
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, g := range []*gateway.Server{c.gw, c.rr} {
		if g != nil {
			errs = append(errs, g.Shutdown(ctx))
		}
	}
	for _, e := range c.engines {
		errs = append(errs, e.srv.Close())
		errs = append(errs, <-e.served)
	}
	c.client.CloseIdleConnections()
	if c.ckptDir != "" {
		errs = append(errs, os.RemoveAll(c.ckptDir))
	}
	return errors.Join(errs...)
}

// engineURLs returns the engines' base URLs.
func (c *cluster) engineURLs() []string {
	out := make([]string, len(c.engines))
	for i, e := range c.engines {
		out[i] = e.url
	}
	return out
}
