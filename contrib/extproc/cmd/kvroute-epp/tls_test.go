package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/kvroute/kvroute/contrib/extproc"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

// tlsLeaf completes a TLS handshake with addr, offering HTTP/2 as gRPC
// clients do, and returns the certificate the server presented.
func tlsLeaf(t *testing.T, addr string) *x509.Certificate {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // the test reads the certificate itself
	require.NoError(t, err)
	defer c.Close()
	st := c.ConnectionState()
	require.Equal(t, "h2", st.NegotiatedProtocol)
	require.NotEmpty(t, st.PeerCertificates)
	return st.PeerCertificates[0]
}

// By default, as with the Inference Extension's picker, the ext_proc port
// speaks TLS with a self-signed certificate, and a gRPC client over TLS
// reaches the picker; the health port stays plaintext, for Kubernetes' gRPC
// probes.
func TestSecureServingSelfSigned(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	f, err := parseFlags([]string{"--pool-name", "p"}, io.Discard)
	require.NoError(t, err)
	require.True(t, f.secureServing, "TLS by default, as upstream")
	m := startEPPWith(t, "--secure-serving")
	leaf := tlsLeaf(t, m[1])
	require.Equal(t, "kvroute-epp", leaf.Subject.CommonName)
	require.Contains(t, leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}))) //nolint:gosec // self-signed
	require.NoError(t, err)
	defer conn.Close()
	stream, err := extprocv3.NewExternalProcessorClient(conn).Process(ctx)
	require.NoError(t, err)
	require.NoError(t, stream.CloseSend())
	_, err = stream.Recv()
	require.ErrorIs(t, err, io.EOF, "the picker answered over TLS")

	hconn, err := grpc.NewClient(m[2], grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer hconn.Close()
	_, err = healthpb.NewHealthClient(hconn).Check(ctx, &healthpb.HealthCheckRequest{Service: extproc.LivenessService})
	require.NoError(t, err, "the health port is plaintext")
}

// With --cert-path the ext_proc port presents the certificate in tls.crt
// and tls.key; --cert-path with --secure-serving=false, and a directory
// without the pair, are refused.
func TestSecureServingCertPath(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	cert, err := selfSigned(time.Now())
	require.NoError(t, err)
	dir := t.TempDir()
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))

	m := startEPPWith(t, "--secure-serving", "--cert-path", dir)
	require.Equal(t, cert.Certificate[0], tlsLeaf(t, m[1]).Raw)

	_, err = parseFlags([]string{"--endpoints", "127.0.0.1:1", "--cert-path", dir, "--secure-serving=false"}, io.Discard)
	require.ErrorContains(t, err, "--cert-path is for --secure-serving")
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte("model: "+model+"\nblockSize: 16\nevents:\n  enabled: false\n"), 0o600))
	err = run(context.Background(), []string{"--endpoints", "127.0.0.1:1", "--config", cfgPath, "--listen-host", "127.0.0.1", "--grpc-port", "0",
		"--grpc-health-port", "0", "--metrics-port", "0", "--log-level", "error", "--secure-serving", "--cert-path", t.TempDir()}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "--cert-path")
}
