package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/contrib/extproc"
	"github.com/kvroute/kvroute/contrib/k8s"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/internal/cliflag"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
)

// listen opens the picker's ext_proc, health and metrics listeners, in
// that order: net.Listen, which tests replace to make a listener fail.
var listen = net.Listen

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, routeKlog(os.Stderr)) // client-go's klog lines in kvroute-epp's format
	stop()
	cliflag.Exit("kvroute-epp", err)
}

// run serves the picker until ctx ends or a server fails. It owns every
// goroutine it starts and waits for each before it returns: the ext_proc,
// health and metrics servers' Serve loops (each sends its one result on
// errc, which drain reads), the readiness follower (followed), and the
// discoveries', router's and admission's goroutines, which their Close
// stops on the way out.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := newLogger(stderr, f.logEncoder, level)
	followKlog(stderr, log)
	logIgnoredFlags(log, f.ignored)
	tp, stopTracing, err := startTracing(ctx, f, log)
	if err != nil {
		return err
	}
	defer stopTracing() // last: after the router and the picker have ended their spans
	f.llmdServer.logIgnored(log)
	cfg, fromConfig, err := loadConfigStages(f, log)
	if err != nil {
		return err
	}
	if f.checkpoint != "" {
		cfg.Checkpoint.Path = f.checkpoint
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ropts := kvroute.Options{Set: telemetry.Set{Registerer: reg, Logger: log, TracerProvider: tp}}
	if f.eventSelector != "" {
		sel, err := labels.Parse(f.eventSelector)
		if err != nil {
			return fmt.Errorf("--event-selector: %w", err)
		}
		ropts.EventSelector = k8s.Matcher(sel)
	}
	lst, err := loadLoRAConfig(f.loraConfig, fromConfig.lora)
	if err != nil {
		return err
	}
	adm, err := newAdmissionStage(f.admissionConfig, fromConfig.admission, f.engineMetricsConfig, lst.on(), ropts.Set)
	if err != nil {
		return err
	}
	if adm.ctl != nil {
		ropts.Admission = adm.ctl
	}
	aff, err := newSession(f.sessionConfig, fromConfig.session, ropts.Set)
	if err != nil {
		adm.close()
		return err
	}
	var decodeScorers []kvroute.WeightedScorer // the decode pick replaces the router's: the session's next turn prefers its decode endpoint
	if aff != nil {
		defer aff.Close() // after the router and the picker are done
		ropts.Scorers = append(ropts.Scorers, aff.Scorer())
		decodeScorers = append(decodeScorers, aff.Scorer())
	}
	ls, err := lst.newScorer(adm, ropts.Set) // nil without a LoRA scorer
	if err != nil {
		adm.close()
		return err
	}
	if ls != nil {
		defer ls.Close() // after the router and the picker are done; unregisters its metric
		ropts.Scorers = append(ropts.Scorers, ls.Weighted())
		decodeScorers = append(decodeScorers, ls.Weighted())
	}
	dprof, err := newDisagg(f.disaggConfig, fromConfig.disagg, disagg.Options{Set: ropts.Set, DecodeScorers: decodeScorers}) // nil without P/D
	if err != nil {
		adm.close()
		return err
	}
	if dprof != nil {
		defer dprof.Close() // after the router and the picker are done
		ropts.Profile = dprof
	}
	if aff != nil {
		ropts.Profile = aff.Profile(ropts.Profile) // around disagg's, when set
	}
	if ropts.Approximate, err = newApproximate(f.approximateConfig, ropts.Set); err != nil {
		adm.close()
		return err
	}
	router, err := kvroute.New(ctx, cfg, ropts)
	if err != nil {
		adm.close()
		return err
	}
	if err := aff.Share(router.Cluster()); err != nil { // nil-safe: no session affinity, or no cluster
		adm.close() // before the router closes, as below
		router.Close()
		return err
	}
	if dprof != nil {
		dprof.SetEventsLive(disagg.RouterEventsLive(router))
	}
	defer router.Close()
	defer adm.close() // idempotent; runs before the router closes
	if adm.ctl != nil {
		adm.ctl.SetLoad(router.Load())
		if err := adm.ctl.ShareQueues(router.Cluster()); err != nil { // nil without cluster sharing: nothing to share
			return err
		}
	}
	picker, err := extproc.New(extproc.Config{Model: cfg.Model, MaxBodyBytes: f.maxBodyBytes, MaxBodyBytesInFlight: f.maxBodyBytesInFlight, Fallbacks: f.fallbacks,
		ConformanceTestHooks: f.conformanceTestHooks, ObserveCachedTokens: f.observeCachedTokens,
		AllowClientKVTransferParams: f.allowClientKVTransferParams}, router,
		extproc.Options{Set: telemetry.Set{Registerer: reg, Logger: log, TracerProvider: tp}, Admission: adm.ctl, Approximate: ropts.Approximate,
			Session: aff})
	if err != nil {
		return err
	}

	sink := func(eps []kvroute.Endpoint) error {
		picker.SetEndpoints(eps)
		adm.setEndpoints(eps)
		return router.SetEndpoints(eps)
	}
	var discoveries []*k8s.Discovery
	defer func() {
		for _, d := range discoveries {
			d.Close()
		}
	}()
	var ha *leader           // with --ha-enable-leader-election
	var poolD *k8s.Discovery // following the InferencePool or the endpoint selector
	if pool, ok := poolDiscovery(f); ok || f.renderSelector != "" {
		kube, dyn, err := kubeClients(f.kubeconfig, discoveryClientLimits)
		if err != nil {
			return err
		}
		// Leader election shares discovery's client: without limits of its
		// own, each API group's client keeps a client-go rate limiter apart,
		// and the election alone uses coordination.k8s.io, so the pods'
		// watches (core) and the pool's (the dynamic client) never delay a
		// renewal, nor the renewals a list (TestElectionHasItsOwnRateLimit).
		if ha, err = startLeaderElection(ctx, f, kube, router.Cluster() != nil, ropts.Set); err != nil {
			return err
		}
		defer ha.stop()
		if ok {
			d, err := k8s.New(pool, kube, dyn, sink,
				k8s.Options{Set: ropts.Set.With(prometheus.Labels{"discovery": "pool"})})
			if err != nil {
				return err
			}
			discoveries = append(discoveries, d)
			poolD = d
		}
		if f.renderSelector != "" {
			renderSink := func(eps []kvroute.Endpoint) error {
				reps := make([]render.Endpoint, len(eps))
				for i, e := range eps {
					reps[i] = render.Endpoint{ID: e.ID, URL: e.URL()}
				}
				return router.SetRenderEndpoints(reps)
			}
			d, err := k8s.New(k8s.Config{Namespace: f.poolNamespace, Selector: f.renderSelector, TargetPorts: []int32{int32(f.renderPort)}},
				kube, dyn, renderSink, k8s.Options{Set: ropts.Set.With(prometheus.Labels{"discovery": "render"})})
			if err != nil {
				return err
			}
			discoveries = append(discoveries, d)
		}
	}
	if f.staticEndpoints != nil {
		if err := sink(f.staticEndpoints); err != nil {
			return err
		}
	}

	reloads, err := newCertReloads(f, ropts.Set) // nil without --enable-cert-reload
	if err != nil {
		return err
	}
	mserving, err := newMetricsServing(&f.llmdServer, f.kubeconfig, reloads, ropts.Set)
	if err != nil {
		return err
	}
	defer mserving.close() // stops reloading its certificate pair, after the metrics server has stopped
	grpcLn, err := listen("tcp", net.JoinHostPort(f.listenHost, strconv.Itoa(f.grpcPort)))
	if err != nil {
		return err
	}
	healthLn, err := listen("tcp", net.JoinHostPort(f.listenHost, strconv.Itoa(f.healthPort)))
	if err != nil {
		grpcLn.Close()
		return err
	}
	metricsLn, err := listen("tcp", net.JoinHostPort(f.listenHost, strconv.Itoa(f.metricsPort)))
	if err != nil {
		grpcLn.Close()
		healthLn.Close()
		return err
	}
	gopts := append(grpcServerOptions(f), f.llmdServer.grpcOptions()...)
	creds, stopCertReload, err := extProcTLS(f, reloads, ropts.Set)
	if err != nil {
		grpcLn.Close()
		healthLn.Close()
		metricsLn.Close()
		return err
	}
	defer stopCertReload()
	if creds != nil {
		gopts = append(gopts, creds)
	}
	gs := grpc.NewServer(gopts...)
	if f.healthChecking {
		picker.Register(gs) // the ext_proc service and the health service
	} else {
		extprocv3.RegisterExternalProcessorServer(gs, picker)
	}
	hs := grpc.NewServer(grpcServerOptions(f)...)
	healthpb.RegisterHealthServer(hs, picker.Health())
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	status := picker.StatusHandler(router)
	mux.Handle(extproc.ReadyPath, status)
	mux.Handle(extproc.StatusPath, status)
	ms, metricsLn := mserving.serve(mux, metricsLn)
	errc := make(chan error, 3)
	go func() { errc <- gs.Serve(grpcLn) }()
	go func() { errc <- hs.Serve(healthLn) }()
	go func() {
		if err := ms.Serve(metricsLn); !errors.Is(err, http.ErrServerClosed) {
			errc <- err
			return
		}
		errc <- nil
	}()
	fmt.Fprintf(stdout, "kvroute-epp: ext_proc on %s, health on %s, metrics on %[6]s://%[3]s/metrics (status page %[6]s://%[3]s%[4]s, readiness %[6]s://%[3]s%[5]s)\n",
		grpcLn.Addr(), healthLn.Addr(), metricsLn.Addr(), extproc.StatusPath, extproc.ReadyPath, mserving.scheme())

	// While discovery waits for its caches, the readiness reason says why
	// (an API server's refusal of a list, say); never ready meanwhile.
	syncCtx, stopSyncing := context.WithCancel(ctx)
	syncFollowed := make(chan struct{})
	go func() {
		defer close(syncFollowed)
		if len(discoveries) > 0 {
			picker.FollowReadiness(syncCtx, syncGate(discoveries), f.readinessInterval)
		}
	}()
	for _, d := range discoveries {
		if err := d.Start(ctx); err != nil {
			stopSyncing()
			<-syncFollowed
			stopServers(gs, hs, ms, f.stop)
			drain(errc, 3)
			if ctx.Err() != nil { // SIGTERM before the caches synced: a normal stop, said, not an error
				log.Info("Stopped before endpoint discovery synced", "err", err)
				return nil
			}
			return err
		}
	}
	stopSyncing()
	<-syncFollowed
	// Discovery has synced; ready once the index has caught up too.
	followCtx, stopFollowing := context.WithCancel(ctx)
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		picker.FollowReadiness(followCtx, poolReadiness(poolD, ha.gate(router)), f.readinessInterval)
	}()

	var serveErr error
	pending := 3 // serve results still to come on errc
	select {
	case <-ctx.Done():
	case serveErr = <-errc: // a server failed on its own
		pending--
	}
	stopFollowing()
	<-followed
	picker.Shutdown() // health fails first, so that Envoy stops sending new streams
	if serveErr == nil {
		pending, serveErr = f.llmdServer.drainWindow(errc, pending)
	}
	adm.close() // the queued requests are answered 503 at once, not held until the drain ends
	stopServers(gs, hs, ms, f.stop)
	drain(errc, pending)
	return serveErr
}

// syncGate is the picker's readiness source while the discoveries ds wait
// for their caches: never ready, with the last error the first unsynced
// one's informers reported (a list RBAC forbids, an API server that does
// not answer). Followed only until every Start has returned.
type syncGate []*k8s.Discovery

func (ds syncGate) NotReady() string {
	for _, d := range ds {
		if err := d.SyncError(); err != nil {
			return notSynced + ": " + err.Error()
		}
	}
	return notSynced
}

// notSynced is the readiness reason while endpoint discovery waits for
// its caches.
const notSynced = "endpoint discovery has not synced"

// poolReadiness returns the picker's readiness source: src, with the
// reason the pool's discovery d (nil: none) finds its InferencePool
// unusable in front (its CRD not installed, the pool missing or being
// deleted), so that a picker without endpoints says why.
func poolReadiness(d *k8s.Discovery, src extproc.ReadinessSource) extproc.ReadinessSource {
	if d == nil {
		return src
	}
	return poolGate{d, src}
}

type poolGate struct {
	d   *k8s.Discovery
	src extproc.ReadinessSource
}

func (g poolGate) NotReady() string {
	reason := g.src.NotReady() // asked whatever d says: it runs the router's give-up clocks
	if err := g.d.PoolError(); err != nil {
		return err.Error()
	}
	return reason
}

// drain waits for the n serve goroutines that have not yet given their
// result on errc to return.
func drain(errc chan error, n int) {
	for range n {
		<-errc
	}
}

// newLogger logs to w at level, as JSON objects with --zap-encoder json and
// as key=value text lines otherwise.
func newLogger(w io.Writer, encoder string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if encoder == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
