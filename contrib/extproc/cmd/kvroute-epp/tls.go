package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/kvroute/kvroute/telemetry"
)

// The ext_proc server over TLS (--secure-serving), as the Inference
// Extension's picker serves it by default: with the certificate and key in
// --cert-path (tls.crt and tls.key, as a Kubernetes TLS secret mounts
// them), or, without one, a self-signed certificate made at start, which a
// gateway told to skip verification (Istio's DestinationRule with
// insecureSkipVerify, say) accepts. The health server stays plaintext:
// Kubernetes' gRPC probes do not speak TLS. It is on by default, as
// upstream's; kvroute's own chart and plain manifests speak h2c and pass
// --secure-serving=false.
// With --enable-cert-reload, --cert-path's pair is read again as it
// changes (certreload.go).

// selfSignedValidity is how long the certificate made at start is valid.
const selfSignedValidity = 10 * 365 * 24 * time.Hour

// extProcTLS returns the ext_proc server's TLS option, or nil when
// --secure-serving is off, and the function that stops its certificate
// reloading (--enable-cert-reload with --cert-path, counted in reloads; a
// no-op otherwise).
func extProcTLS(f flags, reloads *prometheus.CounterVec, set telemetry.Set) (grpc.ServerOption, func(), error) {
	noop := func() {}
	if !f.secureServing {
		return nil, noop, nil
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	f.llmdServer.applyTLS(conf) // --tls-min-version, --tls-cipher-suites
	stop := noop
	switch {
	case f.enableCertReload && f.certPath != "":
		r, err := newCertReloader(f.certPath, extProcPair, reloads, set.Log())
		if err != nil {
			return nil, noop, err
		}
		conf.GetCertificate = r.getCertificate
		stop = r.Close
	case f.certPath != "":
		crt, key, err := readPair(f.certPath)
		var cert tls.Certificate
		if err == nil {
			cert, err = tls.X509KeyPair(crt, key)
		}
		if err != nil {
			return nil, noop, fmt.Errorf("--cert-path: %w", err)
		}
		conf.Certificates = []tls.Certificate{cert}
	default:
		cert, err := selfSigned(time.Now())
		if err != nil {
			return nil, noop, fmt.Errorf("--secure-serving: self-signed certificate: %w", err)
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	return grpc.Creds(credentials.NewTLS(conf)), stop, nil
}

// selfSigned makes a self-signed ECDSA P-256 server certificate valid from
// now.
func selfSigned(now time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{Organization: []string{"kvroute"}, CommonName: "kvroute-epp"},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(selfSignedValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
