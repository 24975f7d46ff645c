// Package zmqx makes go-zeromq/zmq4 v0.17.0 safe to point at engines kvroute
// does not control. It is shared by the replay client and the KV-event
// subscribers and publisher.
//
// Used bare, go-zeromq hangs forever in Dial when a peer accepts TCP but never
// sends the ZMTP greeting, has no receive deadline, lets one mute client block
// its accept loop, allocates whatever frame size a peer announces (a 1 TiB
// frame kills the process) and panics on a malformed READY command. zmqx
// registers a guarded TCP transport (Scheme, "tcpx") that go-zeromq sockets
// dial and listen through. Its connections
//
//   - bound the handshake, until the peer's READY command has arrived, by one
//     deadline (default 1 s) that a peer sending a byte at a time cannot
//     extend, then every read by an optional idle deadline;
//   - follow ZMTP 3.x framing across arbitrary read boundaries and fail the
//     connection with a non-timeout net.Error (*GuardError) and zero bytes
//     when a frame exceeds MaxFrameSize (default 64 MiB) or a message exceeds
//     MaxMessageSize, before go-zeromq allocates anything;
//   - validate the peer's READY metadata so that go-zeromq cannot panic on it;
//   - are closed when their socket's context ends, including connections
//     go-zeromq abandons after a failed handshake;
//   - speak ZMTP 3.1 heartbeats, which go-zeromq lacks: the peer's PING is
//     answered with PONG (a libzmq publisher with ZMQ_HEARTBEAT_IVL would
//     otherwise drop the connection every heartbeat timeout), and with
//     Options.HeartbeatInterval a PING is sent on that interval and a peer
//     that sends nothing within HeartbeatTimeout of it fails the connection
//     with ErrPeerDead (a frozen publisher keeps its TCP connection open and
//     is otherwise invisible), also when the PING cannot go out because a
//     write to a peer that reads nothing holds the connection (no
//     WriteTimeout). Commands are written only between messages, since
//     go-zeromq writes a frame's header and body separately.
//
// Options travel with the socket's context (WithOptions), so every socket can
// have its own deadlines while sharing the one registered transport. NewSub,
// NewDealer, Dial, ListenSocket, CloseDrain and Recv wrap the patterns the
// supervisor layer needs: one dial attempt (retries 0), logging through a
// *slog.Logger, close followed by a drain, and skipping ZMTP commands.
//
// For kvroute's own server sockets (the Go publisher and the replay server),
// Listener and Conn avoid go-zeromq's socket machinery altogether: go-zeromq
// performs the handshake (zmq4.Open), each in its own goroutine under the
// handshake deadline, and frames are then read and written directly. This
// sidesteps the PUB socket's unbounded queue and its writer goroutine, which
// Close never stops. A Conn answers its peer's PINGs in ReadMsg and, with
// Options.HeartbeatInterval, sends its own and fails with ErrPeerDead when
// the peer stays silent past HeartbeatTimeout: kvroute's bind mode, where
// engines connect to a Listener, detects a frozen engine this way.
// ServeRouter is the request/reply servers' (replay and snapshot) whole
// connection side: a ROUTER Listener, Serve's goroutine per connection
// under a connection limit, a read loop that hands each message to the
// server's handler, the counts of rejected, failed and idle connections,
// the server's metrics (registered all or none before it binds), and a
// Close that ends and waits for them all and unregisters the metrics.
package zmqx
