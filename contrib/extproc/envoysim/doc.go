// Package envoysim is a small HTTP reverse proxy that behaves, towards an
// endpoint picker, the way Envoy's ext_proc filter does with full-duplex
// streamed bodies: for each HTTP request it opens one ext_proc stream, sends
// the request headers (with the :method, :path, :authority and :scheme
// pseudo-headers) and the body in chunks, waits for the picker's header and
// body answers (or an immediate response), forwards the request to the
// endpoint named in the destination header, then sends the response headers
// (with the served endpoint in the metadata context) and every response body
// chunk through the picker before writing it to the client. It applies the
// picker's set_headers as Envoy's ext_proc filter does: an entry replaces
// the header's values unless its deprecated append is true (unset is
// false), and append_action is not read; its remove_headers are removed
// first, as Envoy removes them (pseudo-headers and host excepted), so that
// a client's header the picker removes does not reach the upstream.
//
// The picker may name several endpoints ("ip:port,ip:port,..."): with
// Config.Retries the proxy tries them in order, as Envoy's retry policy goes
// down the list, and reports the one that answered as the served endpoint.
// With Config.FailOpen it behaves as Envoy's ext_proc filter with
// failure_mode_allow: when the picker cannot be reached or fails, the
// request goes to one of the FailOpen endpoints (in turn) without it.
//
// It exists because Envoy is not installable where kvroute is built and
// tested: the extproc package's tests and the demo use it to run the whole
// path end to end. It is not a production proxy (no TLS, no timeouts, no
// HTTP/2 upstreams).
package envoysim
