// Package stallwrite bounds how long each write of an HTTP response may
// wait for its client to take it: the kvroute gateway's proxied responses
// and the checkpoint handler's index snapshots. A client that stops reading
// would otherwise hold what its response holds (a body budget's share, an
// engine request, one of a few serving slots) for as long as it keeps its
// connection. The deadline restarts at every write, so a slow client that
// keeps reading is never cut.
package stallwrite
