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
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// The ext_proc server over TLS (--secure-serving), as the Inference
// Extension's picker serves it by default: with the certificate and key in
// --cert-path (tls.crt and tls.key, as a Kubernetes TLS secret mounts
// them), or, without one, a self-signed certificate made at start, which a
// gateway told to skip verification (Istio's DestinationRule with
// insecureSkipVerify, say) accepts. The health server stays plaintext:
// Kubernetes' gRPC probes do not speak TLS. kvroute-epp serves h2c by
// default, as its own chart and the README's Envoy configuration expect.

// selfSignedValidity is how long the certificate made at start is valid.
const selfSignedValidity = 10 * 365 * 24 * time.Hour

// extProcTLS returns the ext_proc server's TLS option, or nil when
// --secure-serving is off.
func extProcTLS(f flags) (grpc.ServerOption, error) {
	if !f.secureServing {
		return nil, nil
	}
	var cert tls.Certificate
	var err error
	if f.certPath != "" {
		cert, err = tls.LoadX509KeyPair(filepath.Join(f.certPath, "tls.crt"), filepath.Join(f.certPath, "tls.key"))
		if err != nil {
			return nil, fmt.Errorf("--cert-path: %w", err)
		}
	} else if cert, err = selfSigned(time.Now()); err != nil {
		return nil, fmt.Errorf("--secure-serving: self-signed certificate: %w", err)
	}
	return grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})), nil
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
