package checkpoint

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/cluster"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
)

// advertisedPeer serves a warm index's snapshot, as peer does, from a
// Keeper that knows the URL it advertises (its pool's snapshotUrl): srv's
// URL plus path.
func advertisedPeer(t *testing.T, token, path string, clk telemetry.Clock) (*Keeper, *httptest.Server, string) {
	t.Helper()
	var h http.Handler
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hh := h
		mu.Unlock()
		hh.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	url := srv.URL + path
	ix := newIndex(t, testBlockSize)
	k, err := Restore(t.Context(), ix, Config{}, BootstrapConfig{Token: token},
		Options{Set: telemetry.Set{Logger: testLogger(t), Clock: clk}, Cluster: cluster.Config{SnapshotURL: url}})
	require.NoError(t, err)
	k.Start()
	t.Cleanup(k.Close)
	for i := 0; i < 4; i++ {
		storeBlocks(t, k.ix, "10.0.0.1:8000", 30+i, 4, "peer-pos")
	}
	mu.Lock()
	h = k.Handler()
	mu.Unlock()
	return k, srv, url
}

// get asks url's snapshot with auth (none when empty) and host (the URL's
// when empty), and returns the status.
func get(t *testing.T, url, auth, host string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// A replica that bootstraps from its pool sends the peers no bearer token,
// only a proof bound to the URL it calls and the time: anyone who can write
// Redis and points a record at a server of theirs collects no token, and
// the proof they collect opens no real replica's snapshot, whichever host
// and path it is sent with. The real replica still serves the bootstrap.
func TestBootstrapTokenNeverLeavesForAPoolRecordsURL(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	rs := redistest.Start(t)
	defer func() { _ = rs.Stop() }()
	pool := func(id, url string) cluster.Config {
		return cluster.Config{Addrs: []string{rs.Addr}, Pool: "hostile", ReplicaID: id, SnapshotURL: url}
	}
	const token = "s3cret-bootstrap-token"
	real, realSrv, realURL := advertisedPeer(t, token, "/kvroute/snapshot", nil)

	var mu sync.Mutex
	var captured []http.Header
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		captured = append(captured, r.Header.Clone())
		mu.Unlock()
		http.Error(w, "nothing here", http.StatusNotFound)
	}))
	defer evil.Close()
	evilURL := evil.URL + "/kvroute/snapshot"
	// The attacker's record: a replica that advertises the attacker's URL.
	tracker, err := tokenload.NewTracker(tokenload.Options{})
	require.NoError(t, err)
	rep, err := cluster.New(pool("evil", evilURL), newIndex(t, testBlockSize), tracker, cluster.Options{})
	require.NoError(t, err)
	defer rep.Close()
	require.Eventually(t, func() bool {
		peers, _, err := cluster.LivePeers(context.Background(), pool("b", ""))
		return err == nil && len(peers) == 1
	}, 20*time.Second, 10*time.Millisecond)

	reg := prometheus.NewRegistry()
	k, err := Restore(context.Background(), newIndex(t, testBlockSize), Config{}, BootstrapConfig{Token: token},
		Options{Set: telemetry.Set{Registerer: reg, Logger: testLogger(t)}, Cluster: pool("b", "")})
	require.NoError(t, err)
	require.Equal(t, 1.0, restores(t, reg, "cluster_peer", "refused"))
	k.Close()

	mu.Lock()
	got := captured
	mu.Unlock()
	require.Len(t, got, 1)
	for name, vs := range got[0] {
		for _, v := range vs {
			require.NotContains(t, v, token, "header %s carries the token", name)
		}
	}
	auth := got[0].Get("Authorization")
	require.NotEmpty(t, auth, "a proof was sent")

	// The captured proof opens no real replica: not as sent, not with the
	// attacker's host, not at once.
	realHost := strings.TrimPrefix(realSrv.URL, "http://")
	evilHost := strings.TrimPrefix(evil.URL, "http://")
	require.Equal(t, http.StatusUnauthorized, get(t, realURL, auth, ""))
	require.Equal(t, http.StatusUnauthorized, get(t, realURL, auth, evilHost))
	require.Equal(t, http.StatusUnauthorized, get(t, "http://"+realHost+"/", auth, evilHost))
	require.Equal(t, 3.0, testutil.ToFloat64(real.met.serves.WithLabelValues("unauthorized")))
	require.Zero(t, testutil.ToFloat64(real.met.serves.WithLabelValues("ok")))

	// The real replica, advertised, serves the bootstrap.
	trackerR, err := tokenload.NewTracker(tokenload.Options{})
	require.NoError(t, err)
	repR, err := cluster.New(pool("real", realURL), real.ix, trackerR, cluster.Options{})
	require.NoError(t, err)
	defer repR.Close()
	rep.Close() // the attacker's record leaves
	require.Eventually(t, func() bool {
		peers, _, err := cluster.LivePeers(context.Background(), pool("c", ""))
		return err == nil && len(peers) == 1 && peers[0].SnapshotURL == realURL
	}, 20*time.Second, 10*time.Millisecond)
	reg = prometheus.NewRegistry()
	k, err = Restore(context.Background(), newIndex(t, testBlockSize), Config{}, BootstrapConfig{Token: token},
		Options{Set: telemetry.Set{Registerer: reg, Logger: testLogger(t)}, Cluster: pool("c", "")})
	require.NoError(t, err)
	require.Equal(t, 1.0, restores(t, reg, "cluster_peer", "loaded"))
	k.Close()
	require.Equal(t, 1.0, testutil.ToFloat64(real.met.serves.WithLabelValues("ok")))
}

// The handler refuses, and counts, a proof with a wrong mac, one for
// another URL, and one dated beyond the allowed clock skew, in the past or
// the future; a proof within the skew for its own URL is served.
func TestHandlerRefusesBadProofs(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	clk := telemetry.NewManual(time.Unix(1_800_000_000, 0))
	k, _, url := advertisedPeer(t, "tok", "/snap", clk)
	now := clk.Now()
	ok := snapshotAuthorization("tok", url, now)
	require.Equal(t, http.StatusOK, get(t, url, ok, ""))
	require.Equal(t, http.StatusOK, get(t, url, snapshotAuthorization("tok", url, now.Add(-DefaultBootstrapMaxClockSkew)), ""))
	require.Equal(t, http.StatusOK, get(t, url, snapshotAuthorization("tok", url, now.Add(DefaultBootstrapMaxClockSkew)), ""))
	require.Equal(t, 3.0, testutil.ToFloat64(k.met.serves.WithLabelValues("ok")))

	mac := ok[strings.Index(ok, "mac=")+4:]
	flipped := ok[:len(ok)-1] + map[bool]string{true: "0", false: "1"}[mac[len(mac)-1] != '0']
	for _, bad := range []string{
		snapshotAuthorization("wrong", url, now),
		flipped,
		snapshotAuthorization("tok", url+"x", now),
		snapshotAuthorization("tok", "http://other.example:9091/snap", now),
		strings.Replace(ok, fmt.Sprint(now.Unix()), fmt.Sprint(now.Unix()+1), 1), // t changed: the mac no longer matches
		"KVRoute-HMAC t=abc, mac=00",
		"KVRoute-HMAC mac=" + mac,
		"tok",
	} {
		require.Equal(t, http.StatusUnauthorized, get(t, url, bad, ""), "%q", bad)
	}
	require.Equal(t, http.StatusUnauthorized, get(t, url, "", ""))
	require.Equal(t, 9.0, testutil.ToFloat64(k.met.serves.WithLabelValues("unauthorized")))
	for _, at := range []time.Time{now.Add(-DefaultBootstrapMaxClockSkew - time.Second), now.Add(DefaultBootstrapMaxClockSkew + time.Second)} {
		require.Equal(t, http.StatusUnauthorized, get(t, url, snapshotAuthorization("tok", url, at), ""))
	}
	require.Equal(t, 2.0, testutil.ToFloat64(k.met.serves.WithLabelValues("clock_skew")))
	// A proof is for the advertised URL's path only.
	require.Equal(t, http.StatusUnauthorized, get(t, strings.TrimSuffix(url, "/snap")+"/other", ok, ""))
	require.Equal(t, 10.0, testutil.ToFloat64(k.met.serves.WithLabelValues("unauthorized")))
}

// The bootstrap proves its token with the asking replica's clock: a peer
// that bootstraps on the Options' clock is served by a replica on the same
// clock, and one whose clock is beyond the skew is refused as clock_skew.
func TestPeerBootstrapSignsWithTheClock(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	clk := telemetry.NewManual(time.Unix(1_800_000_000, 0))
	k, _, url := advertisedPeer(t, "tok", "/snap", clk)
	reg := prometheus.NewRegistry()
	b, err := Restore(context.Background(), newIndex(t, testBlockSize), Config{}, BootstrapConfig{Peers: []string{url}, Token: "tok"},
		Options{Set: telemetry.Set{Registerer: reg, Logger: testLogger(t), Clock: clk}})
	require.NoError(t, err)
	require.Equal(t, 1.0, restores(t, reg, "peer", "loaded"))
	b.Close()
	require.Equal(t, 1.0, testutil.ToFloat64(k.met.serves.WithLabelValues("ok")))

	far := telemetry.NewManual(clk.Now().Add(time.Hour))
	reg = prometheus.NewRegistry()
	b, err = Restore(context.Background(), newIndex(t, testBlockSize), Config{}, BootstrapConfig{Peers: []string{url}, Token: "tok"},
		Options{Set: telemetry.Set{Registerer: reg, Logger: testLogger(t), Clock: far}})
	require.NoError(t, err)
	require.Equal(t, 1.0, restores(t, reg, "peer", "refused"))
	b.Close()
	require.Equal(t, 1.0, testutil.ToFloat64(k.met.serves.WithLabelValues("clock_skew")))
}
