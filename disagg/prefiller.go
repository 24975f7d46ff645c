package disagg

import (
	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/h1pool"
)

// PrefillerHostPort returns the value of HeaderPrefiller (and
// HeaderPrefillerLLMD) that names the prefill endpoint e to the decode
// pod's routing sidecar: the host:port of e's Address when it has one (the
// scheme's default port, 80 or 443, when the Address names none), else
// e's ID, which is the host:port requests to e go to. The header carries a
// host:port and nothing else, as llm-d's router writes it and its sidecar
// reads it, so naming the endpoint by an ID that is not where its
// requests go would send every split to the wrong place (or to none, a
// local prefill). A sidecar reaches the prefiller at that host:port under
// its own scheme (kvroute-sidecar's --prefiller-scheme) and at the
// request's path from the root: an Address's scheme and path prefix do not
// travel in the header (the gateway's exchange mode, which sends the
// prefill request itself, keeps both). An Address that does not parse,
// which the gateway refuses when it loads its endpoints, yields the ID.
func PrefillerHostPort(e kvroute.Endpoint) string {
	if e.Address == "" {
		return e.ID
	}
	if hp := h1pool.HostPort(e.Address); hp != "" {
		return hp
	}
	return e.ID
}
