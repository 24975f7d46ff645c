package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync/atomic"
)

// headerRequestID is the request ID header: a client's value names the
// request to the router (kvroute.Request.ID); vLLM takes it as its own
// request ID, so the gateway's logs, status page and the engine's logs name
// a request alike.
const headerRequestID = "X-Request-Id"

// requestIDs makes the IDs of requests that arrive without X-Request-Id:
// "kvr-" and a random process prefix, then a counter, unique across
// gateway restarts without a random read per request.
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

func newRequestIDs() *requestIDs {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return &requestIDs{prefix: "kvr-" + hex.EncodeToString(b[:]) + "-"}
}

// next returns a fresh ID.
func (g *requestIDs) next() string { return g.prefix + strconv.FormatUint(g.n.Add(1), 10) }
