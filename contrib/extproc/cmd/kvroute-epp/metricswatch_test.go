package main

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// refuse sends a malformed request line to addr over c and requires
// net/http's own 400.
func refuse(t *testing.T, c net.Conn) {
	t.Helper()
	require.NoError(t, c.SetDeadline(time.Now().Add(time.Minute))) // a hang guard only
	_, err := io.WriteString(c, "NOT A REQUEST LINE\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

// A request net/http refuses unread on kvroute-epp's metrics port is
// counted in kvroute_epp_metrics_refused_requests_total, served on its
// /metrics next to kvroute_epp_metrics_header_timeouts_total; before, the
// metrics port's server refused it without a trace.
func TestMetricsPortCountsRefusedRequests(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	m := startEPPWith(t)
	scraped := scrapePlain(t, m[3])
	require.Contains(t, strings.Split(scraped, "\n"), "kvroute_epp_metrics_refused_requests_total 0")
	require.Contains(t, strings.Split(scraped, "\n"), "kvroute_epp_metrics_header_timeouts_total 0")

	c, err := net.Dial("tcp", strings.TrimPrefix(strings.TrimSuffix(m[3], "/metrics"), "http://"))
	require.NoError(t, err)
	defer c.Close()
	refuse(t, c)

	scraped = scrapePlain(t, m[3])
	require.Contains(t, strings.Split(scraped, "\n"), "kvroute_epp_metrics_refused_requests_total 1")
	require.Contains(t, strings.Split(scraped, "\n"), "kvroute_epp_metrics_header_timeouts_total 0")
}

// Over TLS (--metrics-cert-dir) the metrics port's server counts a header
// that never ends, and a handshake never started, as header timeouts, a
// scrape as neither, and a malformed request as a refusal, though net/http writes it encrypted. The header timeout is
// shortened from its 10 s so that the test waits less.
func TestMetricsPortCountsHeaderTimeoutsOverTLS(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	dir, cert := metricsCertDir(t)
	reg := prometheus.NewRegistry()
	ms, err := newMetricsServing(&llmdServerFlags{metricsCertDir: dir}, "", nil, telemetry.Set{Registerer: reg})
	require.NoError(t, err)
	defer ms.close()
	ms.readHeader = 100 * time.Millisecond
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv, sln := ms.serve(mux, ln)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sln) }()
	defer func() {
		require.NoError(t, srv.Close())
		require.ErrorIs(t, <-served, http.ErrServerClosed)
	}()
	client := httpsClient(t, cert, nil)
	defer client.CloseIdleConnections()
	conf := client.Transport.(*http.Transport).TLSClientConfig

	require.Equal(t, http.StatusOK, get(t, client, "https://"+ln.Addr().String()+"/metrics", ""))

	half, err := tls.Dial("tcp", ln.Addr().String(), conf)
	require.NoError(t, err)
	defer half.Close()
	require.NoError(t, half.SetDeadline(time.Now().Add(time.Minute)))       // a hang guard only
	_, err = io.WriteString(half, "GET /metrics HTTP/1.1\r\nHost: epp\r\n") // the header never ends
	require.NoError(t, err)
	requireClosedByServer(t, half)

	silent, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer silent.Close()
	require.NoError(t, silent.SetDeadline(time.Now().Add(time.Minute))) // a hang guard only
	requireClosedByServer(t, silent)                                    // no handshake

	bad, err := tls.Dial("tcp", ln.Addr().String(), conf)
	require.NoError(t, err)
	defer bad.Close()
	refuse(t, bad)

	require.Equal(t, 2.0, testutil.ToFloat64(ms.watch.HeaderTimeouts))
	require.Equal(t, 1.0, testutil.ToFloat64(ms.watch.Refused))
}
