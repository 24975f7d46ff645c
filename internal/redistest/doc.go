// Package redistest runs a real redis-server for kvroute's tests: Start
// launches /usr/bin/redis-server (Debian's package) on a free loopback port
// with persistence off (--save "" --appendonly no) in a temporary directory,
// waits until it answers PING, and stops it when the test ends.
//
// A missing redis-server skips the test, unless KVROUTE_REQUIRE_REDIS=1, in
// which case it fails (CI sets it). Tests never use the default port 6379, so
// a developer's own Redis is never touched. Server.Stop and Server.Restart let
// a test take Redis away mid-run and bring it back on the same port, the way
// an outage looks to a client; the port lies outside the kernel's ephemeral
// range (internal/testport), so no other socket takes it meanwhile.
package redistest
