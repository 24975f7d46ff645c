package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kvroute/kvroute/disagg/sidecar"
	"github.com/kvroute/kvroute/gateway"
	"github.com/kvroute/kvroute/internal/cliflag"
	"github.com/kvroute/kvroute/telemetry"
)

func main() {
	cliflag.Exit("kvroute-sidecar", run(os.Args[1:]))
}

// defaultIdleTimeout is --idle-timeout's default, the kvroute gateway's
// HTTP server's: a keep-alive connection idle this long is closed, so
// connections a client opened and left cannot pile up until the process
// runs out of descriptors.
const defaultIdleTimeout = gateway.DefaultIdleTimeout

// options are the command-line flags.
type options struct {
	cfg             sidecar.Config
	host            string
	port            int
	metricsPort     int
	logLevel        string
	shutdownTimeout time.Duration
	idleTimeout     time.Duration
	// allowNets and allowPorts, when allowNets is set, restrict the
	// prefillers the sidecar contacts (sidecar.AllowNetworks).
	allowNets  []netip.Prefix
	allowPorts []int
}

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("kvroute-sidecar", flag.ContinueOnError)
	fs.StringVar(&o.host, "host", "0.0.0.0", "listen host")
	fs.IntVar(&o.port, "port", 8000, "listen port for client requests (0 picks a free one)")
	fs.IntVar(&o.metricsPort, "metrics-port", 9090, "port of /metrics, kept apart from the decoder's own /metrics (0 picks a free one, -1 disables)")
	fs.StringVar(&o.cfg.DecoderURL, "decoder", "http://127.0.0.1:8001", "URL of the local decode engine")
	fs.DurationVar(&o.cfg.PrefillTimeout, "prefill-timeout", sidecar.DefaultPrefillTimeout, "deadline of the prefill step; past it the decoder prefills locally")
	fs.Int64Var(&o.cfg.MaxBodyBytes, "max-body-bytes", sidecar.DefaultMaxBodyBytes, "largest client request body")
	fs.DurationVar(&o.cfg.BodyReadTimeout, "body-read-timeout", sidecar.DefaultBodyReadTimeout, "how long a client has to send a request's body after its header (408 and the connection closed past it)")
	fs.DurationVar(&o.cfg.ResponseWriteTimeout, "response-write-timeout", sidecar.DefaultResponseWriteTimeout, "how long each write of a response may wait for the client to take it (the response cut past it, counted as client_stalled)")
	fs.Int64Var(&o.cfg.MaxBodyBytesInFlight, "max-body-bytes-in-flight", 0, fmt.Sprintf("bytes the request bodies of all clients may hold together (503 with Retry-After past it; 0: %d, or --max-body-bytes when larger)", sidecar.DefaultMaxBodyBytesInFlight))
	fs.Int64Var(&o.cfg.MaxPrefillResponseBytes, "max-prefill-response-bytes", sidecar.DefaultMaxPrefillRespBytes, "largest prefiller answer")
	fs.StringVar(&o.cfg.PrefillerScheme, "prefiller-scheme", sidecar.DefaultPrefillerScheme, "scheme used to reach the prefiller's host:port (http or https)")
	fs.BoolVar(&o.cfg.AllowClientKVTransferParams, "allow-client-kv-transfer-params", false,
		"pass on the kv_transfer_params a client's body carries on a request not split, a failed prefill's local fallback included (by default they are removed from every request: a client's do_remote_prefill would make the decoder pull KV blocks from the address it names); only behind a trusted component that sets them")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long in-flight requests may finish on SIGTERM")
	fs.DurationVar(&o.idleTimeout, "idle-timeout", defaultIdleTimeout, "how long a keep-alive connection may wait for its next request before it is closed (both listeners)")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.Func("allowed-prefiller-networks", "comma-separated CIDRs or IPs (the pod network's): a prefiller outside them, or named by host name, is refused and the decoder prefills locally (default: any address, so only a trusted router may reach this port)", func(v string) error {
		nets, err := parseNetworks(v)
		o.allowNets = append(o.allowNets, nets...)
		return err
	})
	fs.Func("allowed-prefiller-ports", "comma-separated ports a prefiller may have (default: any; needs --allowed-prefiller-networks)", func(v string) error {
		ports, err := parsePorts(v)
		o.allowPorts = append(o.allowPorts, ports...)
		return err
	})
	if err := cliflag.Parse(fs, args, os.Stdout); err != nil {
		return nil, err
	}
	if len(o.allowPorts) > 0 && len(o.allowNets) == 0 {
		return nil, errors.New("--allowed-prefiller-ports needs --allowed-prefiller-networks")
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.metricsPort < -1 {
		return nil, fmt.Errorf("--metrics-port must be a port, 0 (a free one) or -1 (no /metrics), got %d", o.metricsPort)
	}
	if o.shutdownTimeout < 0 {
		return nil, fmt.Errorf("--shutdown-timeout must be >= 0, got %v", o.shutdownTimeout)
	}
	if o.idleTimeout <= 0 {
		return nil, fmt.Errorf("--idle-timeout must be positive, got %v", o.idleTimeout)
	}
	return o, nil
}

func run(args []string) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	lg := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serve(ctx, o, lg, nil)
}

// serve runs the sidecar until ctx ends; ready, if set, receives the bound
// addresses (client, metrics) once listening.
func serve(ctx context.Context, o *options, lg *slog.Logger, ready func(addr, metrics string)) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	sopts := sidecar.Options{Set: telemetry.Set{Registerer: reg, Logger: lg}}
	if len(o.allowNets) > 0 {
		sopts.AllowTarget = sidecar.AllowNetworks(o.allowNets, o.allowPorts)
	} else {
		lg.Warn("kvroute-sidecar contacts any prefiller the x-prefiller-host-port header names: only a trusted router may reach its port; --allowed-prefiller-networks restricts it")
	}
	h, err := sidecar.NewHandler(o.cfg, sopts)
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := net.Listen("tcp", net.JoinHostPort(o.host, strconv.Itoa(o.port)))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: gateway.DefaultReadHeaderTimeout, IdleTimeout: o.idleTimeout}
	watch := newConnWatcher()
	reg.MustRegister(watch.HeaderTimeouts, watch.Refused)
	servers := []*http.Server{srv}
	listeners := []net.Listener{watch.Install(srv, l)}
	metricsAddr := ""
	if o.metricsPort >= 0 {
		ml, err := net.Listen("tcp", net.JoinHostPort(o.host, strconv.Itoa(o.metricsPort)))
		if err != nil {
			_ = l.Close()
			return err
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		msrv := &http.Server{Handler: mux, ReadHeaderTimeout: gateway.DefaultReadHeaderTimeout, IdleTimeout: o.idleTimeout}
		servers = append(servers, msrv)
		// Watched too, as the gateway's one listener (serving /metrics)
		// is: a scraper's late header or malformed request is counted.
		listeners = append(listeners, watch.Install(msrv, ml))
		metricsAddr = ml.Addr().String()
	}
	errc := make(chan error, len(servers))
	for i, s := range servers {
		go func() {
			if err := s.Serve(listeners[i]); !errors.Is(err, http.ErrServerClosed) {
				errc <- err
				return
			}
			errc <- nil
		}()
	}
	lg.Info("kvroute-sidecar serving", "addr", l.Addr().String(), "metrics", metricsAddr, "decoder", o.cfg.DecoderURL,
		"prefillTimeout", h.Exchange().Config().PrefillTimeout)
	if ready != nil {
		ready(l.Addr().String(), metricsAddr)
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	for _, s := range servers {
		if err := s.Shutdown(sctx); err != nil {
			_ = s.Close()
		}
	}
	for range len(servers) - boolInt(serveErr != nil) {
		if err := <-errc; err != nil && serveErr == nil {
			serveErr = err
		}
	}
	lg.Info("kvroute-sidecar stopped")
	return serveErr
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
