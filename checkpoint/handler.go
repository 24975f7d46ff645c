package checkpoint

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"

	"github.com/kvroute/kvroute/internal/stallwrite"
	"github.com/kvroute/kvroute/kvindex"
)

// SnapshotContentType is the media type of a served index snapshot.
const SnapshotContentType = "application/vnd.kvroute.index-snapshot"

// maxConcurrentServes bounds the snapshots served at once: each holds a
// 256 KiB write buffer and a copy of the endpoint section being written,
// and costs a pass over the index, so peers asking together (a fleet
// restarting) must not grow the replica's memory with their number.
const maxConcurrentServes = 4

// Handler serves the index's snapshot (the kvindex snapshot format, the
// same bytes as a checkpoint file) to peer replicas that bootstrap from it
// (BootstrapConfig.Peers). It answers GET only and streams: each
// endpoint's section is copied under that endpoint's locks and written with
// none held, so a slow peer delays no event application and no match ever
// waits. A peer that loses the connection mid-stream gets a truncated
// snapshot, which it refuses whole.
//
// With BootstrapConfig.Token set, a request must prove the token without
// carrying it: "Authorization: KVRoute-HMAC t=<unix seconds>, mac=<hex>",
// mac being HMAC-SHA256, keyed with the token, of a fixed label, t and the
// URL requested (PeerSource sends it). The handler checks the mac against
// the snapshot URL this replica advertises (Options.Cluster.SnapshotURL;
// when it advertises none, the URL the request names, its Host and
// target), requires the request's path to be that URL's, and t to be
// within BootstrapConfig.MaxClockSkew of its clock; the comparisons are
// in constant time. A proof is thus good only for the URL it names, for a
// short while: one collected by whoever a peer's record in Redis points
// to opens no other replica. A refused request is answered 401 and
// counted (result "unauthorized", or "clock_skew" for a valid proof dated
// beyond the skew). For a rolling upgrade from a release that sent the
// token itself, "Authorization: Bearer <token>" (the scheme's name in any
// case) is still accepted, and logged; the next release refuses it.
// Mount the handler on an internal port
// only (not a gateway's public listener): the snapshot reveals which
// prefixes every engine caches, and serving one costs a pass over the
// index. At most 4 snapshots are served at once; a request beyond that is
// answered 503 with Retry-After and counted (result "busy"), and a
// bootstrapping peer tries another replica, asking this one again once
// Retry-After has passed should no other serve it (see BootstrapConfig.Peers). A peer that stops reading for
// BootstrapConfig.ServeWriteTimeout is cut off, giving its slot back, and
// counted (result "stalled"); so is a peer that keeps reading but takes
// the snapshot slower than BootstrapConfig.ServeMinRate after that grace
// (result "too_slow").
func (k *Keeper) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet {
			k.met.serves.WithLabelValues("method_not_allowed").Inc()
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		if k.token != "" {
			switch checkAuth(req, k.token, k.self, k.set.Clk().Now(), k.skew) {
			case authOK:
			case authLegacy:
				k.log.Warn("Snapshot asked with a plain bearer token (a replica of an older release): served, but this release is the last to accept it", "peer", req.RemoteAddr)
			case authClockOff:
				k.met.serves.WithLabelValues("clock_skew").Inc()
				k.log.Warn("Snapshot refused: the peer's proof is dated beyond bootstrap.maxClockSkew of this replica's clock", "peer", req.RemoteAddr, "maxClockSkew", k.skew)
				w.Header().Set("WWW-Authenticate", authScheme+` realm="kvroute-snapshot"`)
				http.Error(w, "unauthorized: clock skew", http.StatusUnauthorized)
				return
			default:
				k.met.serves.WithLabelValues("unauthorized").Inc()
				w.Header().Set("WWW-Authenticate", authScheme+` realm="kvroute-snapshot"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		select {
		case k.serving <- struct{}{}:
			defer func() { <-k.serving }()
		default:
			k.met.serves.WithLabelValues("busy").Inc()
			w.Header().Set("Retry-After", "1")
			http.Error(w, "serving other peers' snapshots; try again", http.StatusServiceUnavailable)
			return
		}
		h := w.Header()
		h.Set("Content-Type", SnapshotContentType)
		h.Set("Cache-Control", "no-store")
		h.Set("X-Kvroute-Snapshot-Format", strconv.Itoa(kvindex.SnapshotFormatVersion))
		h.Set("X-Kvroute-Block-Size", strconv.Itoa(k.ix.BlockSize()))
		// Every write may wait k.stall for the peer to take it, and the
		// writes may wait k.stall plus their bytes at k.minRate in all (see
		// BootstrapConfig.ServeWriteTimeout and ServeMinRate).
		sw := stallwrite.StartFloor(w, k.stall, stallwrite.Floor{Rate: k.minRate, Grace: k.stall, Clock: k.set.Clk()})
		defer sw.Stop()
		bw := bufio.NewWriterSize(sw, 256<<10)
		info, err := k.ix.WriteSnapshot(bw)
		if err == nil {
			err = bw.Flush()
		}
		if stallwrite.TooSlow(err) {
			k.met.serves.WithLabelValues("too_slow").Inc()
			k.log.Warn("Serving the index snapshot cut: the peer read slower than the floor rate", "peer", req.RemoteAddr,
				"minBytesPerSecond", k.minRate, "err", err)
			return
		}
		if stallwrite.Stalled(err) {
			k.met.serves.WithLabelValues("stalled").Inc()
			k.log.Warn("Serving the index snapshot cut: the peer stopped reading", "peer", req.RemoteAddr, "writeTimeout", k.stall)
			return
		}
		if err != nil {
			k.met.serves.WithLabelValues("error").Inc()
			k.log.Warn("Serving the index snapshot failed", "peer", req.RemoteAddr, "err", err)
			return
		}
		k.met.serves.WithLabelValues("ok").Inc()
		k.log.Info("Index snapshot served", "peer", req.RemoteAddr, "endpoints", len(info.Endpoints),
			"memberships", info.Memberships, "bytes", info.Bytes)
	})
}

// bearerToken returns the token of an Authorization header value of the
// Bearer scheme, whose name HTTP matches case-insensitively (RFC 9110,
// section 11.1).
func bearerToken(auth string) (string, bool) {
	const scheme = "Bearer "
	if len(auth) < len(scheme) || !strings.EqualFold(auth[:len(scheme)], scheme) {
		return "", false
	}
	return auth[len(scheme):], true
}
