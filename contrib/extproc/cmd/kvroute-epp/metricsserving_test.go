package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/kvroute/kvroute/contrib/extproc"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// testCA is a certificate authority for the metrics port's mTLS tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "scrapers"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// client returns a client certificate the CA signed.
func (ca *testCA) client(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "prometheus"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// metricsCertDir writes a server pair for the metrics port into a new
// directory and returns it with the pair.
func metricsCertDir(t *testing.T) (string, tls.Certificate) {
	t.Helper()
	dir := t.TempDir()
	cert := newCert(t)
	writePair(t, dir, cert)
	return dir, cert
}

// httpsClient trusts server's certificate and presents client, if any.
func httpsClient(t *testing.T, server tls.Certificate, client *tls.Certificate) *http.Client {
	t.Helper()
	leaf, err := x509.ParseCertificate(server.Certificate[0])
	require.NoError(t, err)
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	conf := &tls.Config{RootCAs: roots, ServerName: "kvroute-epp", MinVersion: tls.VersionTLS12,
		InsecureSkipVerify: true, //nolint:gosec // the self-signed test certificate names no host; its chain is checked below
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			c, err := x509.ParseCertificate(raw[0])
			if err != nil {
				return err
			}
			_, err = c.Verify(x509.VerifyOptions{Roots: roots})
			return err
		}}
	if client != nil {
		conf.Certificates = []tls.Certificate{*client}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: conf}}
}

// --metrics-cert-dir serves the metrics port over TLS with its tls.crt
// and tls.key, and --metrics-client-ca-file requires a client certificate
// the CA verifies: a client without one fails the handshake, one with it
// scrapes; the kubelet's /ready is served over the same TLS.
func TestMetricsMutualTLS(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	dir, server := metricsCertDir(t)
	ca := newTestCA(t)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(caFile, ca.pem, 0o600))

	m := startEPPWith(t, "--metrics-cert-dir", dir, "--metrics-client-ca-file", caFile)
	require.True(t, strings.HasPrefix(m[3], "https://"), m[3])

	anon := httpsClient(t, server, nil)
	defer anon.CloseIdleConnections()
	_, err := anon.Get(m[3])
	require.Error(t, err, "no client certificate: the handshake fails")

	cc := ca.client(t)
	c := httpsClient(t, server, &cc)
	defer c.CloseIdleConnections()
	require.Equal(t, http.StatusOK, get(t, c, m[3], ""))
	require.Contains(t, []int{http.StatusOK, http.StatusServiceUnavailable},
		get(t, c, strings.TrimSuffix(m[3], "/metrics")+extproc.ReadyPath, ""))

	stranger := newTestCA(t).client(t)
	sc := httpsClient(t, server, &stranger)
	defer sc.CloseIdleConnections()
	_, err = sc.Get(m[3])
	require.Error(t, err, "a client certificate of another CA fails the handshake")
}

// With --metrics-cert-dir and --metrics-endpoint-auth, and no client CA,
// the metrics port is TLS and each scrape needs a Kubernetes token.
func TestMetricsTLSWithEndpointAuth(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	fakeCluster(t, "llm", "qwen")
	dir, server := metricsCertDir(t)
	m, _ := startLLMD(t, llmdChartArgs(guidePickerConfig(t), "--metrics-cert-dir", dir))
	require.True(t, strings.HasPrefix(m[2], "https://"), m[2])
	c := httpsClient(t, server, nil)
	defer c.CloseIdleConnections()
	url := strings.TrimSuffix(m[2], "/metrics") + "/metrics"
	waitDiscovered(t, c, url)
	require.Equal(t, http.StatusUnauthorized, get(t, c, url, ""))
	require.Equal(t, http.StatusOK, get(t, c, url, "scraper"))
}

// The metrics port's settings are checked together, as llm-d checks them:
// auth is on by default with a Kubernetes client (--pool-name) and off
// without one (--endpoints), where asking for it is an error; a client CA
// needs a certificate directory; TLS without either client check is
// refused; and unreadable files stop kvroute-epp at start.
func TestMetricsServingFlags(t *testing.T) {
	f, err := parseFlags([]string{"--pool-name", "p"}, io.Discard)
	require.NoError(t, err)
	require.True(t, f.llmdServer.metricsAuth, "llm-d's default with a Kubernetes client")
	require.True(t, f.llmdServer.enablePprof)
	f, err = parseFlags([]string{"--endpoints", "127.0.0.1:1"}, io.Discard)
	require.NoError(t, err)
	require.False(t, f.llmdServer.metricsAuth, "no Kubernetes client to ask")
	_, err = parseFlags([]string{"--endpoints", "127.0.0.1:1", "--metrics-endpoint-auth"}, io.Discard)
	require.ErrorContains(t, err, "--metrics-endpoint-auth")
	f, err = parseFlags([]string{"--pool-name", "p", "--metrics-endpoint-auth=false"}, io.Discard)
	require.NoError(t, err)
	require.False(t, f.llmdServer.metricsAuth)
	_, err = parseFlags([]string{"--pool-name", "p", "--metrics-endpoint-auth=maybe"}, io.Discard)
	require.ErrorContains(t, err, "metrics-endpoint-auth")

	_, err = parseFlags([]string{"--pool-name", "p", "--metrics-client-ca-file", "ca.crt"}, io.Discard)
	require.ErrorContains(t, err, "--metrics-client-ca-file requires --metrics-cert-dir")
	_, err = parseFlags([]string{"--endpoints", "127.0.0.1:1", "--metrics-cert-dir", "d"}, io.Discard)
	require.ErrorContains(t, err, "without authenticating")

	t.Cleanup(leakcheck.Check(t))
	dir, _ := metricsCertDir(t)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(caFile, []byte("not a certificate"), 0o600))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--metrics-cert-dir", t.TempDir(), "--metrics-client-ca-file", caFile}, "--metrics-cert-dir"},
		{[]string{"--metrics-cert-dir", dir, "--metrics-client-ca-file", caFile}, "no PEM CA certificate"},
		{[]string{"--metrics-cert-dir", dir, "--metrics-client-ca-file", filepath.Join(dir, "absent")}, "--metrics-client-ca-file"},
	} {
		m, done := startOrFail(t, c.args...)
		require.Nil(t, m)
		require.ErrorContains(t, done, c.want)
	}
}

// startOrFail runs kvroute-epp with --endpoints and args expecting it to
// fail at start, and returns its error.
func startOrFail(t *testing.T, args ...string) ([]string, error) {
	t.Helper()
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte("model: "+model+"\nblockSize: 16\nevents:\n  enabled: false\n"), 0o600))
	return nil, run(t.Context(), append([]string{"--endpoints", "127.0.0.1:1", "--config", cfgPath, "--listen-host", "127.0.0.1",
		"--grpc-port", "0", "--grpc-health-port", "0", "--metrics-port", "0", "--secure-serving=false"}, args...), io.Discard, io.Discard)
}

// --enable-pprof (llm-d's default, true) serves Go's profiles on the
// metrics port; false does not.
func TestEnablePprof(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	on := startEPPWith(t)
	require.Equal(t, http.StatusOK, get(t, c, strings.TrimSuffix(on[3], "/metrics")+"/debug/pprof/goroutine?debug=1", ""))
	off := startEPPWith(t, "--enable-pprof=false")
	require.Equal(t, http.StatusNotFound, get(t, c, strings.TrimSuffix(off[3], "/metrics")+"/debug/pprof/goroutine?debug=1", ""))
}

// A metrics port that fails to start part-way (auth set up, then the
// certificate pair or the client CA unreadable) leaves the registry as it
// found it: the auth's metrics are unregistered, so a second start on the
// same registry registers them again.
func TestMetricsServingFailedStartUnregistersAuth(t *testing.T) {
	fakeKube(t, kubefake.NewClientset())
	reg := prometheus.NewRegistry()
	set := telemetry.Set{Registerer: reg}
	missing := filepath.Join(t.TempDir(), "none")
	certDir, _ := metricsCertDir(t)
	for _, l := range []llmdServerFlags{
		{metricsAuth: true, metricsCertDir: missing},
		{metricsAuth: true, metricsCertDir: certDir, metricsClientCAFile: missing},
	} {
		_, err := newMetricsServing(&l, "", nil, set)
		require.Error(t, err)
		mfs, err := reg.Gather()
		require.NoError(t, err)
		require.Empty(t, mfs, "a failed start left metrics registered")
	}
	m, err := newMetricsServing(&llmdServerFlags{metricsAuth: true}, "", nil, set)
	require.NoError(t, err, "the auth's metrics register again")
	m.close()
}
