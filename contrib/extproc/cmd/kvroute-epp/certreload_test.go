package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// writePair writes cert's tls.crt and tls.key into dir as a mounted
// Kubernetes TLS secret holds them, each replaced whole by a rename.
func writePair(t *testing.T, dir string, cert tls.Certificate) {
	t.Helper()
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	require.NoError(t, err)
	writeAtomic(t, filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}))
	writeAtomic(t, filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
}

func writeAtomic(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, b, 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

func newCert(t *testing.T) tls.Certificate {
	t.Helper()
	cert, err := selfSigned(time.Now())
	require.NoError(t, err)
	return cert
}

// scrape returns the picker's metrics page.
func scrape(t *testing.T, url string) string {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	resp, err := c.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// With --enable-cert-reload a rotated pair in --cert-path is presented
// from the next handshake after the poll; a changed pair that does not load
// is counted and the previous certificate kept; and the reloading stops
// with the picker.
func TestEnableCertReload(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	clk := telemetry.NewManual(time.Now())
	certReloadClock = clk
	t.Cleanup(func() { certReloadClock = telemetry.Wall })
	dir := t.TempDir()
	first, second, third := newCert(t), newCert(t), newCert(t)
	writePair(t, dir, first)

	m := startEPPWith(t, "--secure-serving", "--cert-path", dir, "--enable-cert-reload")
	require.Equal(t, first.Certificate[0], tlsLeaf(t, m[1]).Raw)
	wait := 20 * time.Second // bounds the wait for the poll the clock has released

	writePair(t, dir, second)
	clk.Advance(certReloadInterval)
	require.Eventually(t, func() bool {
		return strings.Contains(scrape(t, m[3]), `kvroute_epp_cert_reloads_total{result="reloaded",server="ext_proc"} 1`)
	}, wait, 5*time.Millisecond)
	require.Equal(t, second.Certificate[0], tlsLeaf(t, m[1]).Raw, "the rotated certificate is presented")

	// A certificate whose key is another's: refused, the second kept.
	keyDER, err := x509.MarshalPKCS8PrivateKey(first.PrivateKey)
	require.NoError(t, err)
	writeAtomic(t, filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: third.Certificate[0]}))
	writeAtomic(t, filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	clk.Advance(certReloadInterval)
	require.Eventually(t, func() bool {
		return strings.Contains(scrape(t, m[3]), `kvroute_epp_cert_reloads_total{result="invalid",server="ext_proc"} 1`)
	}, wait, 5*time.Millisecond)
	require.Equal(t, second.Certificate[0], tlsLeaf(t, m[1]).Raw, "a pair that does not load keeps the previous certificate")

	// Mended: served.
	writePair(t, dir, third)
	clk.Advance(certReloadInterval)
	require.Eventually(t, func() bool {
		return strings.Contains(scrape(t, m[3]), `kvroute_epp_cert_reloads_total{result="reloaded",server="ext_proc"} 2`)
	}, wait, 5*time.Millisecond)
	require.Contains(t, scrape(t, m[3]), `kvroute_epp_cert_reloads_total{result="invalid",server="ext_proc"} 1`)
	require.Equal(t, third.Certificate[0], tlsLeaf(t, m[1]).Raw)
}

// --enable-cert-reload needs --cert-path or --metrics-cert-dir: a
// self-signed certificate has no files to reload. A pair file over the
// size bound is refused unread, named by its flag.
func TestEnableCertReloadFlags(t *testing.T) {
	_, err := parseFlags([]string{"--endpoints", "127.0.0.1:1", "--secure-serving", "--enable-cert-reload"}, io.Discard)
	require.ErrorContains(t, err, "--enable-cert-reload")
	_, err = parseFlags([]string{"--endpoints", "127.0.0.1:1", "--secure-serving", "--enable-cert-reload",
		"--metrics-cert-dir", "d", "--metrics-client-ca-file", "ca.crt"}, io.Discard)
	require.NoError(t, err, "the metrics port's pair alone is reloaded")

	dir := t.TempDir()
	writePair(t, dir, newCert(t))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.crt"), make([]byte, maxCertFileBytes+1), 0o600))
	reloads, err := newCertReloads(flags{enableCertReload: true}, telemetry.Set{})
	require.NoError(t, err)
	_, err = newCertReloader(dir, metricsPair, reloads, nil)
	require.ErrorContains(t, err, "--metrics-cert-dir: ")
	require.ErrorContains(t, err, "larger than")
}

// With --enable-cert-reload, --metrics-cert-dir's pair is reloaded too, by
// the reloader --cert-path's uses and counted in the same metric under
// server="metrics": a rotated pair is presented from the next handshake
// after the poll, a changed pair that does not load is refused and counted
// with the previous certificate kept, and --cert-path's count is its own.
func TestMetricsCertReload(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	clk := telemetry.NewManual(time.Now())
	certReloadClock = clk
	t.Cleanup(func() { certReloadClock = telemetry.Wall })
	extDir, dir := t.TempDir(), t.TempDir()
	writePair(t, extDir, newCert(t))
	first, second := newCert(t), newCert(t)
	writePair(t, dir, first)
	ca := newTestCA(t)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(caFile, ca.pem, 0o600))

	m := startEPPWith(t, "--secure-serving", "--cert-path", extDir, "--enable-cert-reload",
		"--metrics-cert-dir", dir, "--metrics-client-ca-file", caFile)
	require.True(t, strings.HasPrefix(m[3], "https://"), m[3])
	cc := ca.client(t)
	conf := &tls.Config{Certificates: []tls.Certificate{cc}, MinVersion: tls.VersionTLS12,
		InsecureSkipVerify: true} //nolint:gosec // the test reads the presented certificate itself
	leaf := func() []byte { // the metrics port's certificate, over mutual TLS
		c, err := tls.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(m[3], "https://"), "/metrics"), conf)
		require.NoError(t, err)
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Raw
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: conf}}
	defer client.CloseIdleConnections()
	scrapeTLS := func() string {
		resp, err := client.Get(m[3])
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
	require.Equal(t, first.Certificate[0], leaf())
	require.Contains(t, scrapeTLS(), `kvroute_epp_cert_reloads_total{result="reloaded",server="metrics"} 0`)
	wait := 20 * time.Second // bounds the wait for the poll the clock has released

	writePair(t, dir, second)
	clk.Advance(certReloadInterval)
	require.Eventually(t, func() bool {
		return strings.Contains(scrapeTLS(), `kvroute_epp_cert_reloads_total{result="reloaded",server="metrics"} 1`)
	}, wait, 5*time.Millisecond)
	require.Equal(t, second.Certificate[0], leaf(), "the rotated certificate is presented")
	require.Contains(t, scrapeTLS(), `kvroute_epp_cert_reloads_total{result="reloaded",server="ext_proc"} 0`, "--cert-path's pair did not change")

	writeAtomic(t, filepath.Join(dir, "tls.crt"), []byte("not a certificate"))
	clk.Advance(certReloadInterval)
	require.Eventually(t, func() bool {
		return strings.Contains(scrapeTLS(), `kvroute_epp_cert_reloads_total{result="invalid",server="metrics"} 1`)
	}, wait, 5*time.Millisecond)
	require.Equal(t, second.Certificate[0], leaf(), "a pair that does not load keeps the previous certificate")
}
