package main

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/telemetry"
)

// --enable-cert-reload: the ext_proc server's certificate pair in
// --cert-path, and the metrics port's in --metrics-cert-dir, are read again
// every certReloadInterval, and each handshake is served the latest valid
// pair, as the Inference Extension's picker reloads the first and llm-d's
// router EPP the second. A Kubernetes TLS secret mounted as a volume is
// updated in place (an atomic symlink swap) when cert-manager or an
// operator rotates it, so a picker that read the pair once would present
// the old certificate until it restarted, past its expiry. A changed pair
// that does not load (a half-written file, a key that does not match the
// certificate) is refused: the previous pair stays in service, the refusal
// is logged once per change and counted in
// kvroute_epp_cert_reloads_total{server="ext_proc"|"metrics",result="invalid"}.

const (
	// certReloadInterval is how often the pair is read again: well within
	// the minutes a mounted secret takes to be updated.
	certReloadInterval = 10 * time.Second
	// maxCertFileBytes bounds what one of the pair's files may hold; a
	// larger file is refused unread. A certificate chain is a few KiB.
	maxCertFileBytes = 1 << 20
)

// certReloadClock drives the reload polling; tests replace it with a
// telemetry.Manual clock.
var certReloadClock telemetry.Clock = telemetry.Wall

// Which pair a certReloader reloads: its flag, and its server label value
// on kvroute_epp_cert_reloads_total.
var (
	extProcPair = certPair{flag: "--cert-path", server: "ext_proc"}
	metricsPair = certPair{flag: "--metrics-cert-dir", server: "metrics"}
)

// certPair names a reloaded certificate pair in errors, logs and the
// reloads metric.
type certPair struct{ flag, server string }

// newCertReloads returns kvroute_epp_cert_reloads_total, registered on
// set, for the reloaders of every pair; nil without --enable-cert-reload.
func newCertReloads(f flags, set telemetry.Set) (*prometheus.CounterVec, error) {
	if !f.enableCertReload {
		return nil, nil
	}
	reloads := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_epp_cert_reloads_total",
		Help: "Changes to a certificate pair seen by --enable-cert-reload, by server (ext_proc: --cert-path; metrics: --metrics-cert-dir) and result: reloaded (served from the next handshake) or invalid (refused, the previous pair kept).",
	}, []string{"server", "result"})
	if err := set.Register(reloads); err != nil {
		return nil, err
	}
	return reloads, nil
}

// certReloader serves the latest valid certificate pair read from a
// directory.
type certReloader struct {
	dir               string
	pair              certPair
	cert              atomic.Pointer[tls.Certificate] // the pair served
	seen              []byte                          // the crt, key and read error last looked at; loop goroutine only
	reloaded, invalid prometheus.Counter              // the pair's kvroute_epp_cert_reloads_total
	log               *slog.Logger
	ticker            telemetry.Ticker
	stop              chan struct{}
	done              chan struct{}
}

// newCertReloader loads dir's pair, which must be valid, and polls it for
// changes until Close, counting them in reloads (newCertReloads').
func newCertReloader(dir string, pair certPair, reloads *prometheus.CounterVec, log *slog.Logger) (*certReloader, error) {
	crt, key, err := readPair(dir)
	r := &certReloader{
		dir:      dir,
		pair:     pair,
		reloaded: reloads.WithLabelValues(pair.server, "reloaded"),
		invalid:  reloads.WithLabelValues(pair.server, "invalid"),
		log:      log,
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	if err == nil {
		err = r.load(crt, key)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pair.flag, err)
	}
	r.seen = fingerprint(crt, key, nil)
	r.ticker = certReloadClock.NewTicker(certReloadInterval)
	go r.loop()
	return r, nil
}

// getCertificate is the TLS configuration's GetCertificate: the pair
// currently served.
func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cert.Load(), nil
}

// Close stops the polling and waits for it.
func (r *certReloader) Close() {
	close(r.stop)
	<-r.done
	r.ticker.Stop()
}

func (r *certReloader) loop() {
	defer close(r.done)
	for {
		select {
		case <-r.stop:
			return
		case <-r.ticker.C():
			r.check()
		}
	}
}

// check reads the pair and, when it differs from what was last looked at,
// serves it or, when it does not load, keeps the pair served.
func (r *certReloader) check() {
	crt, key, rerr := readPair(r.dir)
	fp := fingerprint(crt, key, rerr)
	if bytes.Equal(fp, r.seen) {
		return
	}
	r.seen = fp
	err := rerr
	if err == nil {
		err = r.load(crt, key)
	}
	if err != nil {
		r.invalid.Inc()
		r.log.Error(r.pair.flag+" changed to a certificate pair that does not load; serving the previous one", "dir", r.dir, "err", err)
		return
	}
	r.reloaded.Inc()
	r.log.Info(r.pair.flag+" certificate pair reloaded", "dir", r.dir)
}

// load parses the pair and serves it.
func (r *certReloader) load(crt, key []byte) error {
	cert, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return err
	}
	r.cert.Store(&cert)
	return nil
}

// fingerprint is what check compares: the files' bytes and the read error.
func fingerprint(crt, key []byte, err error) []byte {
	fp := make([]byte, 0, len(crt)+len(key)+32)
	fp = fmt.Appendf(fp, "%d:%d:", len(crt), len(key))
	fp = append(append(fp, crt...), key...)
	if err != nil {
		fp = append(fp, err.Error()...)
	}
	return fp
}

// readPair reads dir's tls.crt and tls.key, each at most maxCertFileBytes.
func readPair(dir string) (crt, key []byte, err error) {
	if crt, err = readBounded(filepath.Join(dir, "tls.crt")); err != nil {
		return nil, nil, err
	}
	if key, err = readBounded(filepath.Join(dir, "tls.key")); err != nil {
		return nil, nil, err
	}
	return crt, key, nil
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCertFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxCertFileBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxCertFileBytes)
	}
	return b, nil
}
