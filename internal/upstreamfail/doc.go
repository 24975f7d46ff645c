// Package upstreamfail sorts the error of a request to an upstream HTTP
// server (a vLLM engine behind the kvroute gateway, the local decoder behind
// the P/D routing sidecar) into a small fixed set of kinds: the server could
// not be reached, it did not answer in time, it closed the connection, or
// something else went wrong.
//
// The error net/http or kvroute's own transport returns names the server's
// address and port and the operating system's error (dial tcp
// 10.1.2.3:8000: connect: connection refused): internal topology that must
// not reach the client. The gateway and the sidecar answer the client with
// the kind's fixed text, log the whole error, and count the kind, a label
// value from a fixed set, never from the error's text.
package upstreamfail
