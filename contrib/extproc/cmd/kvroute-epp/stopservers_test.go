package main

import (
	"fmt"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A metrics request still running when the drain's time is up (a long
// /debug/pprof/profile, a scraper that stalls) is cut: its connection is
// closed, so that its handler ends with the picker instead of outliving it
// for as long as the caller keeps the connection open.
func TestStopServersCutsAMetricsRequestPastTheShutdownTimeout(t *testing.T) {
	check := leakcheck.Check(t)
	entered := make(chan struct{})
	ms := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-r.Context().Done() // held until the connection goes, as pprof's profile is
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- ms.Serve(ln) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close() // after the check: the caller keeps its connection open
	_, err = fmt.Fprintf(c, "GET /debug/pprof/profile HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	<-entered
	stopServers(grpc.NewServer(), grpc.NewServer(), ms)
	require.ErrorIs(t, <-served, http.ErrServerClosed)
	check()
}
