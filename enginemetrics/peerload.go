package enginemetrics

import (
	"math"

	"github.com/kvroute/kvroute/tokenload"
)

// PeerLoads estimates, per endpoint, the load that other routers carry
// there: the engine's waiting and running requests as last scraped, less
// the requests this router has open on it (own; tokenload.Tracker's
// LocalLoad), each charged as many uncached prompt tokens as this router's
// own open requests carry on average, over all the endpoints given.
//
// It is for gateway replicas that share no state (no cluster): each sees
// only the requests it sent, and a request sends no KV event before its
// prefill starts, so nothing else a replica receives shows the queue the
// other replicas built on an engine. The engine's own count does, one
// scrape late; clients that reach the engines without the gateway count
// too, as they should. The result goes to tokenload.Tracker.SetPeerLoads.
//
// It is an estimate: requests this router sent that have not reached the
// engine yet, or that ended at the engine before this router saw their
// answer, make the difference smaller (never below zero), and other
// routers' requests are assumed to carry this router's mix of prompt work.
func PeerLoads(sigs map[string]Signal, own func(endpoint string) (tokens, requests int64)) map[string]tokenload.PeerLoad {
	type excess struct {
		ep    string
		peers int64
	}
	// ownTok is summed as a float64: own loads as absurd as the ones
	// peerTokens caps, on two endpoints, would wrap an int64 sum negative
	// (perReq below zero, every estimate an idle endpoint).
	var ownTok float64
	var ownReq int64
	var over []excess // endpoints where the engine reports more requests than this router has open
	for ep, s := range sigs {
		t, r := own(ep)
		ownTok += float64(t)
		ownReq += r
		if peers := int64(max(s.Waiting, 0)) + int64(max(s.Running, 0)) - r; peers > 0 {
			over = append(over, excess{ep, peers})
		}
	}
	perReq := 0.0
	if ownReq > 0 {
		perReq = ownTok / float64(ownReq)
	}
	out := make(map[string]tokenload.PeerLoad, len(over))
	for _, e := range over {
		out[e.ep] = tokenload.PeerLoad{Tokens: peerTokens(perReq, e.peers), Requests: e.peers}
	}
	return out
}

// maxPeerTokens caps an endpoint's estimated peer tokens: a product of an
// absurd own load per request and a clamped queue length that exceeds
// int64 would otherwise convert to a negative count (an idle endpoint).
const maxPeerTokens = math.MaxInt64 / 2

// peerTokens is perReq × peers rounded, saturated at maxPeerTokens.
func peerTokens(perReq float64, peers int64) int64 {
	v := math.Round(perReq * float64(peers))
	if !(v < maxPeerTokens) { // NaN or too large
		return maxPeerTokens
	}
	return int64(v)
}
