package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/disagg/sidecar"
	"github.com/kvroute/kvroute/gateway"
	"github.com/kvroute/kvroute/simengine/server"
	"github.com/kvroute/kvroute/telemetry"
)

// pdEngineBlocks is the least KV-cache capacity of the P/D step's engines:
// a prefill engine holds every split request's blocks until its decoder
// has read them, so it needs room for several long prompts at once.
const pdEngineBlocks = 1024

// pdFleet is one policy's deployment in the P/D step: four simulated
// engines, a routing sidecar (disagg/sidecar's Handler on its own loopback
// port) in front of each decode engine, and a gateway. All of it belongs to
// the goroutine that runs the policy; close stops it.
type pdFleet struct {
	engines  []*simEngine
	roles    []string // per engine: server.RolePrefill, RoleDecode or RoleBoth
	sidecars []*pdSidecar
	gw       *gateway.Server
	client   *http.Client
}

// pdSidecar is a decode engine's routing sidecar.
type pdSidecar struct {
	h    *sidecar.Handler
	hs   *http.Server
	url  string
	reg  *prometheus.Registry // its kvroute_sidecar_* metrics
	done chan error
}

// startPDFleet starts the engines with roles (server.Role*), a sidecar in
// front of each decode engine, and a gateway with the precise policy whose
// profile step is package disagg's when dis is set (header mode: a split
// request goes to the decode endpoint's sidecar with
// x-prefiller-host-port); it waits until every engine's event stream is
// subscribed.
func startPDFleet(ctx context.Context, o Options, roles []string, dis *disagg.Config) (f *pdFleet, err error) {
	f = &pdFleet{roles: roles, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	defer func() {
		if err != nil {
			_ = f.close()
		}
	}()
	eo := o
	eo.EngineBlocks = max(o.EngineBlocks, pdEngineBlocks)
	eps := make([]kvroute.Endpoint, len(roles))
	for i, role := range roles {
		e, err := startEngineRole(eo, server.PDConfig{Role: role, EngineID: fmt.Sprintf("sim-%s-%d", role, i)})
		if err != nil {
			return f, err
		}
		f.engines = append(f.engines, e)
		eps[i] = kvroute.Endpoint{ID: e.id, EventsAddress: e.srv.KVEventsEndpoint(), ReplayAddress: e.srv.ReplayEndpoint()}
		if dis == nil {
			continue // aggregated: every endpoint serves whole requests
		}
		eps[i].Role = role
		if role == server.RoleDecode {
			sc, err := startPDSidecar(e.url, o)
			if err != nil {
				return f, err
			}
			f.sidecars = append(f.sidecars, sc)
			eps[i].Address = sc.url // requests go through the sidecar; the ID stays the engine's (its events)
		}
	}
	cfg := kvroute.DefaultConfig()
	cfg.Model = o.Model
	cfg.BlockSize = o.BlockSize
	cfg.Events.Enabled = new(true)
	f.gw, err = gateway.NewServer(ctx, gateway.ServerConfig{Listen: "127.0.0.1:0", Router: cfg, Endpoints: eps, Disagg: dis},
		gateway.Options{Set: telemetry.Set{Logger: o.Logger}})
	if err != nil {
		return f, fmt.Errorf("gateway: %w", err)
	}
	c := &cluster{engines: f.engines, pool: f.gw.Router().Events()}
	return f, c.waitSubscribed(ctx, 10*time.Second)
}

// startPDSidecar serves a sidecar Handler in front of the decoder at
// decoderURL on a free loopback port.
func startPDSidecar(decoderURL string, o Options) (*pdSidecar, error) {
	reg := prometheus.NewRegistry()
	h, err := sidecar.NewHandler(sidecar.Config{DecoderURL: decoderURL}, sidecar.Options{Set: telemetry.Set{Registerer: reg, Logger: o.Logger}})
	if err != nil {
		return nil, fmt.Errorf("sidecar: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.Close()
		return nil, err
	}
	sc := &pdSidecar{h: h, reg: reg, url: "http://" + ln.Addr().String(), done: make(chan error, 1),
		hs: &http.Server{Handler: h, ReadHeaderTimeout: gateway.DefaultReadHeaderTimeout, IdleTimeout: gateway.DefaultIdleTimeout}}
	go func() { sc.done <- sc.hs.Serve(ln) }()
	return sc, nil
}

// sidecarCounter sums the sidecars' counter name over the series whose label
// equals value.
func (f *pdFleet) sidecarCounter(name, label, value string) (float64, error) {
	var sum float64
	for _, sc := range f.sidecars {
		mfs, err := sc.reg.Gather()
		if err != nil {
			return 0, err
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == label && l.GetValue() == value {
						sum += m.GetCounter().GetValue()
					}
				}
			}
		}
	}
	return sum, nil
}

// decoderSum sums metric name over the decode engines' /metrics.
func (f *pdFleet) decoderSum(ctx context.Context, name string) (float64, error) {
	var sum float64
	for i, e := range f.engines {
		if f.roles[i] != server.RoleDecode {
			continue
		}
		m, err := Scrape(ctx, f.client, e.url)
		if err != nil {
			return 0, err
		}
		sum += m.Sum(name)
	}
	return sum, nil
}

// close stops the gateway, then the sidecars, then the engines.
func (f *pdFleet) close() error {
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if f.gw != nil {
		errs = append(errs, f.gw.Shutdown(ctx))
	}
	for _, sc := range f.sidecars {
		errs = append(errs, sc.hs.Shutdown(ctx))
		if err := <-sc.done; !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
		sc.h.Close()
	}
	for _, e := range f.engines {
		errs = append(errs, e.srv.Close())
		errs = append(errs, <-e.served)
	}
	f.client.CloseIdleConnections()
	return errors.Join(errs...)
}
