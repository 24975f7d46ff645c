package main

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// The picker's gRPC servers (ext_proc and health) bound what one client can
// hold: how many streams a connection may have open, how often it may ping,
// and how long a connection with no stream may stay.

const (
	// defaultGRPCKeepaliveMinTime is the shortest interval between a
	// client's HTTP/2 PINGs that the servers accept (--grpc-keepalive-min-time).
	// Envoy pings its ext_proc cluster every connection_keepalive.interval,
	// with or without a stream open, less up to 15% jitter; 5s accepts any
	// interval from 6s, while grpc-go's own default (5m, and pings refused
	// on a connection with no stream) would answer a pinging Envoy with
	// GOAWAY too_many_pings after three pings on an idle connection.
	defaultGRPCKeepaliveMinTime = 5 * time.Second
	// defaultGRPCMaxConnectionIdle is how long a connection with no stream
	// open is kept (--grpc-max-connection-idle). It is closed with a
	// graceful GOAWAY, on which Envoy opens a new connection for its next
	// request; Envoy's own upstream idle_timeout (1h by default) usually
	// closes its connections first, so this reclaims abandoned ones.
	defaultGRPCMaxConnectionIdle = 15 * time.Minute
)

// grpcServerOptions are the options of both of the picker's gRPC servers.
// A MaxConcurrentStreams of 0 is grpc-go's default, unlimited.
func grpcServerOptions(f flags) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxConcurrentStreams(f.grpcMaxConcurrentStreams),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime: f.grpcKeepaliveMinTime,
			// Envoy's connection_keepalive pings whether or not a stream
			// is open.
			PermitWithoutStream: true,
		}),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: f.grpcMaxConnectionIdle}),
	}
}
