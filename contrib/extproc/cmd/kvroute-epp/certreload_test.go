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
		return strings.Contains(scrape(t, m[3]), `kvroute_epp_cert_reloads_total{result="reloaded"} 1`)
	}, wait, 5*time.Millisecond)
	require.Equal(t, second.Certificate[0], tlsLeaf(t, m[1]).Raw, "the rotated certificate is presented")

	// A certificate whose key is another's: refused, the second kept.
	keyDER, err := x509.MarshalPKCS8PrivateKey(first.PrivateKey)
	require.NoError(t, err)
	writeAtomic(t, filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: third.Certificate[0]}))
	writeAtomic(t, filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	clk.Advance(certReloadInterval)
	require.Eventually(t, func() bool {
		return strings.Contains(scrape(t, m[3]), `kvroute_epp_cert_reloads_total{result="invalid"} 1`)
	}, wait, 5*time.Millisecond)
	require.Equal(t, second.Certificate[0], tlsLeaf(t, m[1]).Raw, "a pair that does not load keeps the previous certificate")

	// Mended: served.
	writePair(t, dir, third)
	clk.Advance(certReloadInterval)
	require.Eventually(t, func() bool {
		return strings.Contains(scrape(t, m[3]), `kvroute_epp_cert_reloads_total{result="reloaded"} 2`)
	}, wait, 5*time.Millisecond)
	require.Contains(t, scrape(t, m[3]), `kvroute_epp_cert_reloads_total{result="invalid"} 1`)
	require.Equal(t, third.Certificate[0], tlsLeaf(t, m[1]).Raw)
}

// --enable-cert-reload needs --cert-path: a self-signed certificate has no
// files to reload. A pair file over the size bound is refused unread.
func TestEnableCertReloadFlags(t *testing.T) {
	_, err := parseFlags([]string{"--endpoints", "127.0.0.1:1", "--secure-serving", "--enable-cert-reload"}, io.Discard)
	require.ErrorContains(t, err, "--enable-cert-reload")

	dir := t.TempDir()
	writePair(t, dir, newCert(t))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.crt"), make([]byte, maxCertFileBytes+1), 0o600))
	_, err = newCertReloader(dir, telemetry.Set{})
	require.ErrorContains(t, err, "larger than")
}
