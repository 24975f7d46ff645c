package kvroute

import (
	"bufio"
	"crypto/subtle"
	"net/http"
	"strconv"
	"strings"

	"github.com/kvroute/kvroute/kvindex"
)

// SnapshotContentType is the media type of a served index snapshot.
const SnapshotContentType = "application/vnd.kvroute.index-snapshot"

// SnapshotHandler serves the Router's index snapshot (the kvindex snapshot
// format, the same bytes as a checkpoint file) to peer replicas that
// bootstrap from it (BootstrapConfig.Peers). It answers GET only and
// streams: each endpoint's section is copied under that endpoint's locks
// and written with none held, so a slow peer delays no event application
// and Match never waits. A peer that loses the connection mid-stream gets
// a truncated snapshot, which it refuses whole.
//
// With BootstrapConfig.Token set, a request must carry
// "Authorization: Bearer <token>". Mount the handler on an internal port
// only (not the gateway's public listener): the snapshot reveals which
// prefixes every engine caches, and serving one costs a pass over the
// index.
func (r *Router) SnapshotHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s := r.snap
		if req.Method != http.MethodGet {
			s.met.serves.WithLabelValues("method_not_allowed").Inc()
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		if s.token != "" {
			got, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) != 1 {
				s.met.serves.WithLabelValues("unauthorized").Inc()
				w.Header().Set("WWW-Authenticate", `Bearer realm="kvroute-snapshot"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		h := w.Header()
		h.Set("Content-Type", SnapshotContentType)
		h.Set("Cache-Control", "no-store")
		h.Set("X-Kvroute-Snapshot-Format", strconv.Itoa(kvindex.SnapshotFormatVersion))
		h.Set("X-Kvroute-Block-Size", strconv.Itoa(r.index.BlockSize()))
		bw := bufio.NewWriterSize(w, 256<<10)
		info, err := r.index.WriteSnapshot(bw)
		if err == nil {
			err = bw.Flush()
		}
		if err != nil {
			s.met.serves.WithLabelValues("error").Inc()
			r.log.Warn("Serving the index snapshot failed", "peer", req.RemoteAddr, "err", err)
			return
		}
		s.met.serves.WithLabelValues("ok").Inc()
		r.log.Info("Index snapshot served", "peer", req.RemoteAddr, "endpoints", len(info.Endpoints),
			"memberships", info.Memberships, "bytes", info.Bytes)
	})
}
