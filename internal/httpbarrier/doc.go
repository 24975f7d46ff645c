// Package httpbarrier is a loopback HTTP server for connection-pool tests:
// it holds every request until n of them are in flight at once, then lets
// the round through, and counts the TCP connections it accepts.
//
// A round of n concurrent requests through a client therefore needs n
// upstream connections at the same moment, so a test can tell exactly how
// many connections a pool opens, keeps idle and reuses (kvroute's render
// client and the gateway's upstream transport are both checked this way).
// The package adds no module dependency.
package httpbarrier
