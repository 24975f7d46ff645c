// Package stallwrite bounds how long each write of an HTTP response may
// wait for its client to take it: the kvroute gateway's proxied responses
// and the checkpoint handler's index snapshots. A client that stops reading
// would otherwise hold what its response holds (a body budget's share, an
// engine request, one of a few serving slots) for as long as it keeps its
// connection. The deadline restarts at every write, so a slow client that
// keeps reading is never cut by it.
//
// A response may also have a floor rate (StartFloor): a client that takes
// a few bytes within every deadline restarts it forever, so a response
// that holds a scarce slot (an index snapshot) must in addition average a
// minimum rate after a grace period. A response whose client legitimately
// trickles, as a streamed completion does, has none.
package stallwrite
