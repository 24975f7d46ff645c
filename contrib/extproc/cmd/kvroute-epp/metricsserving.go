package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/contrib/extproc"
	"github.com/kvroute/kvroute/gateway"
	"github.com/kvroute/kvroute/internal/connwatch"
	"github.com/kvroute/kvroute/telemetry"
)

// The metrics port as llm-d's router EPP serves it: behind
// --metrics-endpoint-auth (metricsauth.go) but for /ready, which the
// kubelet probes; over TLS with --metrics-cert-dir's tls.crt and tls.key,
// requiring a client certificate verified by --metrics-client-ca-file when
// given; and with Go's pprof handlers under /debug/pprof/ (--enable-pprof).
// The certificate pair is read at start and, with --enable-cert-reload,
// again as it changes (certreload.go), as llm-d's router EPP reloads it.

// metricsServing is how the metrics port serves, from the flags.
type metricsServing struct {
	auth  *metricsAuth  // nil: every caller is served
	tls   *tls.Config   // nil: plain HTTP
	certs *certReloader // --metrics-cert-dir's pair under --enable-cert-reload; nil: read once
	pprof bool
	log   *slog.Logger

	// watch counts the header timeouts and refusals of the port's server
	// (metricswatch.go), registered in set until close.
	watch      *connwatch.Watcher
	set        telemetry.Set
	readHeader time.Duration // the server's ReadHeaderTimeout; 0: gateway.DefaultReadHeaderTimeout
}

// newMetricsServing loads l's certificates, reloaded as they change and
// counted in reloads when it is not nil (--enable-cert-reload), and, with
// --metrics-endpoint-auth, a Kubernetes client from kubeconfig for the
// reviews, of their own and limited to their rate. Close it when done.
func newMetricsServing(l *llmdServerFlags, kubeconfig string, reloads *prometheus.CounterVec, set telemetry.Set) (*metricsServing, error) {
	m := &metricsServing{pprof: l.enablePprof, log: set.Log(), watch: newMetricsWatcher(), set: set}
	if err := set.Register(m.watch.HeaderTimeouts, m.watch.Refused); err != nil {
		return nil, err
	}
	if l.metricsAuth {
		// The reviews' own client, limited to what the review rate lets
		// through: the rate, not client-go's default, bounds them.
		limits := reviewClientLimits(l.metricsAuthConfig.withDefaults().reviewRate)
		kube, _, err := kubeClients(kubeconfig, limits)
		if err != nil {
			m.close()
			return nil, fmt.Errorf("--metrics-endpoint-auth: %w", err)
		}
		if m.auth, err = newMetricsAuth(kube, l.metricsAuthConfig, set); err != nil {
			m.close()
			return nil, err
		}
	}
	switch {
	case l.metricsCertDir != "" && reloads != nil:
		r, err := newCertReloader(l.metricsCertDir, metricsPair, reloads, set.Log())
		if err != nil {
			m.close()
			return nil, err
		}
		m.certs = r
		m.tls = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.getCertificate}
	case l.metricsCertDir != "":
		crt, key, err := readPair(l.metricsCertDir)
		var cert tls.Certificate
		if err == nil {
			cert, err = tls.X509KeyPair(crt, key)
		}
		if err != nil {
			m.close()
			return nil, fmt.Errorf("--metrics-cert-dir: %w", err)
		}
		m.tls = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	}
	if l.metricsClientCAFile != "" {
		pem, err := readBounded(l.metricsClientCAFile) // at most maxCertFileBytes
		if err != nil {
			m.close()
			return nil, fmt.Errorf("--metrics-client-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			m.close()
			return nil, fmt.Errorf("--metrics-client-ca-file %s: no PEM CA certificate in it", l.metricsClientCAFile)
		}
		m.tls.ClientCAs = pool
		m.tls.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return m, nil
}

// close stops reloading the certificate pair, if it was, and unregisters
// the auth's metrics and the watcher's, so that a start that fails part-way leaves the
// registry as it found it.
func (m *metricsServing) close() {
	if m.certs != nil {
		m.certs.Close()
	}
	if m.auth != nil {
		m.auth.close()
	}
	if m.watch != nil {
		m.set.Unregister(m.watch.HeaderTimeouts, m.watch.Refused)
	}
}

// scheme is the metrics port's URL scheme.
func (m *metricsServing) scheme() string {
	if m.tls != nil {
		return "https"
	}
	return "http"
}

// serve returns the metrics server of mux, with pprof and behind the
// auth as set, and ln, over TLS as set, its connections watched under
// the TLS (m.watch).
func (m *metricsServing) serve(mux http.Handler, ln net.Listener) (*http.Server, net.Listener) {
	guarded := mux
	if m.pprof {
		pm := http.NewServeMux()
		pm.Handle("/", mux)
		pm.HandleFunc("/debug/pprof/", pprof.Index)
		pm.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		pm.HandleFunc("/debug/pprof/profile", pprof.Profile)
		pm.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		pm.HandleFunc("/debug/pprof/trace", pprof.Trace)
		guarded = pm
	}
	if m.auth != nil {
		guarded = m.auth.wrap(guarded)
	}
	outer := http.NewServeMux()
	outer.Handle(extproc.ReadyPath, mux) // the kubelet's probe: no token
	outer.Handle("/", guarded)
	readHeader := m.readHeader
	if readHeader == 0 {
		readHeader = gateway.DefaultReadHeaderTimeout
	}
	srv := metricsServer(outer, readHeader, gateway.DefaultIdleTimeout)
	if m.watch != nil {
		ln = m.watch.Install(srv, ln)
	}
	if m.tls != nil {
		ln = tls.NewListener(ln, m.tls)
	}
	// A scraper's failed handshake (no or an unverified client
	// certificate) is its own problem: logged at debug.
	if m.log != nil {
		srv.ErrorLog = slog.NewLogLogger(m.log.Handler(), slog.LevelDebug)
	}
	return srv, ln
}
