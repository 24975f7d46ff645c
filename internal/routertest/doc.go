// Package routertest holds the checks that every request/reply server
// built on zmqx.ServeRouter (the replay and the snapshot servers) runs in
// its own tests, through its own client, so that the behaviour they share
// is checked the same way for each and a failure names the server that
// broke it. Only test files import it.
//
// SilentPeersClosedAsIdle checks the idle timeout's purpose: peers that
// complete their ZMTP handshake and then send nothing hold every
// connection slot until the idle timeout closes them, and a client that
// asks meanwhile is served once a slot is free.
package routertest
