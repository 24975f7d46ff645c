#!/usr/bin/python3
"""Emulates vLLM's KV-event publisher (ZmqEventPublisher) on real libzmq, for
kvroute's interop tests.

Sockets (spec/wire.md §1 and §7):
  * PUB bound on tcp://127.0.0.1:<port> (or connected with --connect, the
    centralized topology), sending [topic, seq as 8 bytes big-endian, msgpack
    KVEventBatch]; sequences start at 0 (or --start-seq) and grow by 1.
  * optional replay ROUTER (--replay) answering [identity, b"", start8] with one
    message per buffered batch with seq >= start, then the END sentinel:
      --layout current (vllm#45177 and later): [id, b"", topic, seq8, payload],
                                               END [id, b"", b"", ff*8, b""]
      --layout legacy  (earlier vLLM, SGLang): [id, b"", seq8, payload],
                                               END [id, b"", ff*8, b""]
    Requests that are not exactly 3 frames are ignored and counted, like vLLM.
    The ROUTER keeps libzmq's default send high-water mark (1,000), as vLLM
    does, or --replay-hwm N: replies past it are dropped silently (vLLM sets
    no ROUTER_MANDATORY), so a long replay arrives with holes.

vLLM behaviours reproduced (read from vLLM's vllm/distributed/kv_events.py,
ZmqEventPublisher, in the revisions quoted):
  * a batch is sent on the PUB first and appended to the replay buffer after
    (so a replay racing the send may not have it yet);
  * an idle engine publishes nothing at all: no heartbeat, no keep-alive
    (vLLM sets only the PUB's HWM; --heartbeat-ivl exists to test libzmq
    peers that do set ZMQ_HEARTBEAT_IVL);
  * the PUB's high-water mark (--hwm, vLLM default 100,000) silently drops
    messages a slow subscriber has not taken ("burst N" with a small --hwm);
  * --batch-shape map: the outer batch as msgspec encodes vLLM's EventBatch
    Struct on current main ({"ts", "events", "data_parallel_rank"}, a map,
    fields at their default omitted); array: [ts, events, dp_rank] as the
    array_like Structs of earlier revisions;
  * the replay reply is [identity, b"", seq8, payload] (4 frames at the
    ROUTER) on current main and in SGLang (--layout legacy), and
    [identity, b"", topic, seq8, payload] in the revisions that added the
    topic frame (--layout current);
  * a restart starts the sequence at 0 with an empty replay buffer and no
    epoch ("restart K": an in-process restart on the same ports that
    publishes K batches at once, before any subscriber has re-dialled; the
    new lifetime's batches differ from the old one's).

vLLM's snapshot revision (vllm-project/vllm#57789), with --identity:
  * payload: the publisher draws a 16-byte identity (uuid4().bytes) when it
    starts and on every restart, and appends it to the array batch
    ([ts, events, dp_rank, publisher_id]; "publisher_id" in a map batch), as
    its example snapshot subscriber reads it;
  * frame: the earlier draft of that work, which appended the identity to
    the live sequence frame instead (seq8 + id16; replay replies keep seq8);
  * either way, when the publisher has sent nothing for --heartbeat-every
    seconds (vLLM: 1) it publishes an empty batch with the next sequence
    number, buffered for replay like any other ("heartbeats off" stops them
    while the sockets stay open: a wedged publisher thread).
SGLang with snapshots on, with --identity topic: the live topic is the
configured one, then b"\x00sgl-kv-epoch=" and the epoch (uuid4().hex, drawn
when the publisher starts and on every restart); no idle heartbeats.
TensorRT-LLM (--format trtllm, NVIDIA/TensorRT-LLM#16869 and #17023): the
generated BlockStored is the map its StreamingKVCacheEventManager writes
(no extra_keys, group_idx or kv_cache_spec_kind; medium "GPU"), in the
array batch [ts, events, dp_rank], with vLLM's framing and replay.

On start it prints one JSON line: {"pub": ..., "replay": ..., "pid": ..., "zmq": ...}.
It then reads commands from stdin, one per line, and answers each with one JSON
line ({"ok": true, ...} or {"ok": false, "error": ...}):

  publish N            publish N generated BlockStored batches
  publish-hex HEX...   publish one batch per hex-encoded msgpack payload
  hide N               buffer N generated batches for replay without sending
                       them on the PUB (a gap that replay can repair)
  skip N               consume N sequence numbers (a permanent gap)
  clear                publish one AllBlocksCleared batch
  replay-mode normal | silent | partial K
                       silent: read requests, never answer; partial: answer
                       the first K batches and no END
  layout current | legacy
  status               next_seq, buffered, replay_requests, invalid_requests,
                       subscribers (connections whose handshake completed),
                       publisher_id (hex, "" without --identity), heartbeats
                       (empty batches sent)
  bogus SEQ            buffer one generated batch at sequence SEQ for replay
                       only (a broken or hostile replay socket)
  burst N              publish N batches as fast as possible (with a small
                       --hwm, libzmq drops what the subscriber cannot take)
  restart K            close both sockets, rebind the same ports, start again
                       at sequence 0 (lifetime + 1; a new identity) and
                       publish K batches
  heartbeats on | off  with --identity: send idle heartbeats or not
  stop                 close the sockets and exit 0 (also on stdin EOF)

Generated batch for sequence s in lifetime L (0 at start, +1 per restart),
map events; an array outer batch, or a map one with --batch-shape map:
  [ts, [{"type": "BlockStored", "block_hashes": [H(s, 0) .. H(s, B-1)],
         "parent_block_hash": None, "token_ids": T(s), "block_size": S,
         "lora_id": None, "medium": "GPU", "lora_name": None,
         "extra_keys": [None] * B, "group_idx": 0,
         "kv_cache_spec_kind": "full_attention"}], 0]
  with B = --blocks, S = --block-size, H(s, j) = (s + 1) * 1000 + j + L * 10**9
  and token j*S + k of T(s) = (s * 7919 + L * 104729 + j * S + k) % 50000.
"""

import argparse
import binascii
import json
import sys
import threading
import time
import uuid

import msgpack
import zmq
from zmq.utils.monitor import recv_monitor_message

END_SEQ = (-1).to_bytes(8, "big", signed=True)


def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def block_hash(seq, j, life=0):
    return (seq + 1) * 1000 + j + life * 10**9


def token_ids(seq, blocks, block_size, life=0):
    return [(seq * 7919 + life * 104729 + i) % 50000 for i in range(blocks * block_size)]


def pack_batch(events, shape, pid=None):
    """pid: the 16-byte publisher identity of vLLM's snapshot revision,
    written after the rank (array) or under "publisher_id" (map)."""
    if shape == "map":
        # msgspec, omit_defaults: data_parallel_rank is set by publish().
        batch = {"ts": time.time(), "events": events, "data_parallel_rank": 0}
        if pid is not None:
            batch["publisher_id"] = pid
        return msgpack.packb(batch, use_bin_type=True)
    batch = [time.time(), events, 0]
    if pid is not None:
        batch.append(pid)
    return msgpack.packb(batch, use_bin_type=True)


def generated_batch(seq, blocks, block_size, life=0, shape="array", pid=None, fmt="vllm"):
    event = {
        "type": "BlockStored",
        "block_hashes": [block_hash(seq, j, life) for j in range(blocks)],
        "parent_block_hash": None,
        "token_ids": token_ids(seq, blocks, block_size, life),
        "block_size": block_size,
        "lora_id": None,
        "medium": "GPU",
        "lora_name": None,
    }
    if fmt == "vllm":
        event.update({
            "extra_keys": [None] * blocks,
            "group_idx": 0,
            "kv_cache_spec_kind": "full_attention",
        })
    return pack_batch([event], shape, pid)


def cleared_batch(shape="array", pid=None):
    return pack_batch([{"type": "AllBlocksCleared"}], shape, pid)


class Publisher:
    def __init__(self, args):
        self.args = args
        self.ctx = zmq.Context()
        self.topic = args.topic.encode()
        self.seq = args.start_seq
        self.life = 0
        self.lock = threading.Lock()
        self.send_lock = threading.Lock()  # PUB use vs restart
        self.buffer = []  # (seq, payload), oldest first
        self.layout = args.layout
        self.replay_mode = ("normal", 0)
        self.replay_requests = 0
        self.invalid_requests = 0
        self.subscribers = 0
        self.stopping = threading.Event()

        self.restarts = 0
        self.pid = uuid.uuid4().bytes if args.identity != "none" else None
        self.last_send = time.monotonic()
        self.heartbeats_on = args.identity not in ("none", "topic")
        self.heartbeats = 0
        self.open_sockets(args.pub_port, args.replay_port)

    def open_sockets(self, pub_port, replay_port):
        args = self.args
        self.stopping = threading.Event()
        self.pub = self.ctx.socket(zmq.PUB)
        self.pub.set_hwm(args.hwm)
        if args.heartbeat_ivl > 0:
            self.pub.setsockopt(zmq.HEARTBEAT_IVL, args.heartbeat_ivl)
            self.pub.setsockopt(zmq.HEARTBEAT_TIMEOUT, args.heartbeat_ivl * 3)
        self.monitor = self.pub.get_monitor_socket(
            zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED)
        if args.connect:
            # vLLM offsets the publisher's endpoint port by the data-parallel
            # rank, the connect endpoint too: rank r connects to port + r.
            self.pub_addr = offset_port(args.connect, args.dp_rank)
            self.pub.connect(self.pub_addr)
        else:
            self.pub_addr = self.bind(self.pub, pub_port)

        self.router = None
        self.replay_addr = None
        if args.replay:
            self.router = self.ctx.socket(zmq.ROUTER)
            if args.replay_hwm > 0:
                self.router.setsockopt(zmq.SNDHWM, args.replay_hwm)
            if args.replay_sndbuf > 0:
                self.router.setsockopt(zmq.SNDBUF, args.replay_sndbuf)
            self.replay_addr = self.bind(self.router, replay_port)

        self.threads = [threading.Thread(target=self.watch, daemon=True)]
        if self.pid is not None:
            self.threads.append(threading.Thread(target=self.heartbeat, daemon=True))
        if self.router is not None:
            self.threads.append(threading.Thread(target=self.serve_replay, daemon=True))
        for t in self.threads:
            t.start()

    def close_sockets(self, linger):
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=2)
        self.pub.disable_monitor()
        self.monitor.close(linger=0)
        if self.router is not None:
            self.router.close(linger=0)
        self.pub.close(linger=linger)

    def restart(self, k):
        """An engine restart on the same ports: new sequence from 0, empty
        buffer, different batches; K of them published before anyone can
        have re-dialled: they are made while the sockets are closed, so
        they are in the replay buffer (PUB would have dropped them, with no
        subscriber yet) whenever a subscriber dials in, however slowly the
        ports come back."""
        pub_port = 0 if self.args.connect else int(self.pub_addr.rsplit(":", 1)[1])
        replay_port = int(self.replay_addr.rsplit(":", 1)[1]) if self.replay_addr else 0
        with self.send_lock:
            self.close_sockets(0)
            with self.lock:
                self.seq, self.buffer, self.subscribers = 0, [], 0
                self.life += 1
                self.restarts += 1
                if self.pid is not None:
                    self.pid = uuid.uuid4().bytes
            seqs = [self.publish_locked(self.batch(), send=False) for _ in range(k)]
            deadline = time.time() + 5
            while True:  # libzmq releases the ports asynchronously
                try:
                    self.open_sockets(pub_port, replay_port)
                    break
                except zmq.ZMQError:
                    if time.time() > deadline:
                        raise
                    time.sleep(0.01)
        return seqs

    def batch(self):
        a = self.args
        return generated_batch(self.seq, a.blocks, a.block_size, self.life, a.batch_shape,
                               self.payload_pid(), a.format)

    def payload_pid(self):
        return self.pid if self.args.identity == "payload" else None

    def heartbeat(self):
        """vLLM's publisher thread with snapshots on: an empty batch, with the
        next sequence number, after a second without sending."""
        stopping = self.stopping
        every = self.args.heartbeat_every
        while not stopping.wait(min(every / 4, 0.05)):
            with self.lock:
                due = self.heartbeats_on and time.monotonic() - self.last_send >= every
            # Never wait on send_lock: a restart holds it while it joins
            # this thread.
            if not due or not self.send_lock.acquire(timeout=0.05):
                continue
            try:
                if stopping.is_set():
                    return
                self.publish_locked(pack_batch([], self.args.batch_shape, self.payload_pid()))
                with self.lock:
                    self.heartbeats += 1
            finally:
                self.send_lock.release()

    @staticmethod
    def bind(sock, port):
        if port:
            # A restarted publisher binds its predecessor's port. A subscriber
            # redialling that port while nothing listens can land on it
            # itself (a TCP self-connect: the kernel picks the port as the
            # dial's own source port), holding it until its handshake fails
            # and it closes; so an address in use is retried for a while.
            deadline = time.monotonic() + 30
            while True:
                try:
                    sock.bind("tcp://127.0.0.1:%d" % port)
                    return "tcp://127.0.0.1:%d" % port
                except zmq.ZMQError as e:
                    if e.errno != zmq.EADDRINUSE or time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        port = sock.bind_to_random_port("tcp://127.0.0.1")
        return "tcp://127.0.0.1:%d" % port

    def watch(self):
        poller = zmq.Poller()
        poller.register(self.monitor, zmq.POLLIN)
        stopping = self.stopping
        while not stopping.is_set():
            if not poller.poll(50):
                continue
            ev = recv_monitor_message(self.monitor)
            with self.lock:
                if ev["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                    self.subscribers += 1
                elif ev["event"] == zmq.EVENT_DISCONNECTED:
                    self.subscribers = max(0, self.subscribers - 1)

    def next_seq(self):
        with self.lock:
            s = self.seq
            self.seq += 1
            return s

    def buffer_add(self, seq, payload):
        with self.lock:
            self.buffer.append((seq, payload))
            if len(self.buffer) > self.args.buffer:
                del self.buffer[: len(self.buffer) - self.args.buffer]

    def publish(self, payload, send=True):
        with self.send_lock:
            return self.publish_locked(payload, send)

    def publish_locked(self, payload, send=True):
        seq = self.next_seq()
        if send:  # like vLLM: sent first, buffered after
            seq_frame = seq.to_bytes(8, "big")
            topic = self.topic
            if self.args.identity == "frame":
                seq_frame += self.pid
            elif self.args.identity == "topic":
                topic += b"\x00sgl-kv-epoch=" + self.pid.hex().encode()
            self.pub.send_multipart([topic, seq_frame, payload])
            with self.lock:
                self.last_send = time.monotonic()
        self.buffer_add(seq, payload)
        return seq

    def serve_replay(self):
        poller = zmq.Poller()
        poller.register(self.router, zmq.POLLIN)
        stopping = self.stopping
        while not stopping.is_set():
            if not poller.poll(50):
                continue
            frames = self.router.recv_multipart()
            if len(frames) != 3:
                with self.lock:
                    self.invalid_requests += 1
                continue
            ident, start = frames[0], int.from_bytes(frames[2], "big")
            with self.lock:
                self.replay_requests += 1
                mode, k = self.replay_mode
                layout = self.layout
                batches = [(s, p) for (s, p) in self.buffer if s >= start]
            if mode == "silent":
                continue
            if mode == "partial":
                batches = batches[:k]
            for s, p in batches:
                if layout == "current":
                    self.router.send_multipart([ident, b"", self.topic, s.to_bytes(8, "big"), p])
                else:
                    self.router.send_multipart([ident, b"", s.to_bytes(8, "big"), p])
            if mode == "partial":
                continue
            if layout == "current":
                self.router.send_multipart([ident, b"", b"", END_SEQ, b""])
            else:
                self.router.send_multipart([ident, b"", END_SEQ, b""])

    def command(self, line):
        parts = line.split()
        if not parts:
            return {"ok": False, "error": "empty command"}
        cmd, rest = parts[0], parts[1:]
        a = self.args
        if cmd in ("publish", "hide", "burst"):
            n = int(rest[0]) if rest else 1
            seqs = [self.publish(self.batch(), send=(cmd != "hide")) for _ in range(n)]
            return {"ok": True, "first": seqs[0] if seqs else None, "last": seqs[-1] if seqs else None}
        if cmd == "bogus":
            seq = int(rest[0])
            with self.lock:
                self.buffer.append((seq, generated_batch(seq % 1000000, a.blocks, a.block_size, self.life,
                                                         a.batch_shape, self.payload_pid(), a.format)))
            return {"ok": True, "first": seq, "last": seq}
        if cmd == "restart":
            seqs = self.restart(int(rest[0]) if rest else 0)
            return {"ok": True, "first": seqs[0] if seqs else None, "last": seqs[-1] if seqs else None,
                    "life": self.life}
        if cmd == "publish-hex":
            seqs = [self.publish(binascii.unhexlify(h)) for h in rest]
            return {"ok": True, "first": seqs[0] if seqs else None, "last": seqs[-1] if seqs else None}
        if cmd == "clear":
            return {"ok": True, "first": self.publish(cleared_batch(a.batch_shape, self.payload_pid()))}
        if cmd == "heartbeats":
            if not rest or rest[0] not in ("on", "off"):
                return {"ok": False, "error": "heartbeats must be on or off"}
            with self.lock:
                self.heartbeats_on = rest[0] == "on" and self.pid is not None and self.args.identity != "topic"
            return {"ok": True}
        if cmd == "skip":
            n = int(rest[0]) if rest else 1
            with self.lock:
                self.seq += n
                return {"ok": True, "next_seq": self.seq}
        if cmd == "replay-mode":
            mode = rest[0] if rest else "normal"
            if mode not in ("normal", "silent", "partial"):
                return {"ok": False, "error": "unknown replay mode %r" % mode}
            with self.lock:
                self.replay_mode = (mode, int(rest[1]) if len(rest) > 1 else 0)
            return {"ok": True}
        if cmd == "layout":
            if not rest or rest[0] not in ("current", "legacy"):
                return {"ok": False, "error": "layout must be current or legacy"}
            with self.lock:
                self.layout = rest[0]
            return {"ok": True}
        if cmd == "status":
            with self.lock:
                return {"ok": True, "next_seq": self.seq, "buffered": len(self.buffer),
                        "replay_requests": self.replay_requests,
                        "invalid_requests": self.invalid_requests,
                        "subscribers": self.subscribers, "life": self.life,
                        "publisher_id": self.pid.hex() if self.pid else "",
                        "heartbeats": self.heartbeats}
        return {"ok": False, "error": "unknown command %r" % cmd}

    def close(self):
        self.close_sockets(self.args.linger)
        self.ctx.term()


def offset_port(endpoint, rank):
    """Return endpoint ("tcp://host:port") with its port offset by rank."""
    if rank == 0:
        return endpoint
    host, port = endpoint.rsplit(":", 1)
    return "%s:%d" % (host, int(port) + rank)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pub-port", type=int, default=0, help="PUB port on 127.0.0.1 (0 = random)")
    p.add_argument("--connect", default="", help="connect the PUB to this endpoint instead of binding")
    p.add_argument("--dp-rank", type=int, default=0,
                   help="data-parallel rank: like vLLM, the --connect endpoint's port is offset by it")
    p.add_argument("--replay", action="store_true", help="serve replays on a ROUTER")
    p.add_argument("--replay-port", type=int, default=0, help="ROUTER port on 127.0.0.1 (0 = random)")
    p.add_argument("--layout", choices=["current", "legacy"], default="current")
    p.add_argument("--replay-hwm", type=int, default=0,
                   help="ROUTER send high-water mark (0 = libzmq's default 1,000, as vLLM)")
    p.add_argument("--replay-sndbuf", type=int, default=0,
                   help="ROUTER kernel send buffer in bytes (0 = the OS default)")
    p.add_argument("--topic", default="kv@127.0.0.1:8000@test-model")
    p.add_argument("--start-seq", type=int, default=0)
    p.add_argument("--buffer", type=int, default=10000, help="replay buffer size in batches")
    p.add_argument("--blocks", type=int, default=2, help="blocks per generated batch")
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--hwm", type=int, default=100000, help="PUB high-water mark (vLLM default 100,000)")
    p.add_argument("--batch-shape", choices=["array", "map"], default="array",
                   help="outer batch encoding: map as on vLLM main, array as earlier revisions")
    p.add_argument("--heartbeat-ivl", type=int, default=0, help="ZMQ_HEARTBEAT_IVL in ms (vLLM sets none)")
    p.add_argument("--linger", type=int, default=1000, help="PUB linger on stop, ms")
    p.add_argument("--identity", choices=["none", "payload", "frame", "topic"], default="none",
                   help="vLLM's snapshot revision: a publisher identity in the batch (payload) or, as an "
                        "earlier draft, in the sequence frame (frame), and idle heartbeats; or SGLang's "
                        "epoch in the topic (topic), without heartbeats")
    p.add_argument("--heartbeat-every", type=float, default=1.0,
                   help="with --identity: idle seconds before an empty batch (vLLM: 1)")
    p.add_argument("--format", choices=["vllm", "trtllm"], default="vllm",
                   help="generated events: vLLM's, or TensorRT-LLM's (no extra_keys, group or kind)")
    args = p.parse_args()

    pub = Publisher(args)
    out({"pub": pub.pub_addr, "replay": pub.replay_addr, "pid": __import__("os").getpid(),
         "zmq": zmq.zmq_version()})
    try:
        for line in sys.stdin:
            line = line.strip()
            if not line:
                continue
            if line == "stop":
                out({"ok": True})
                break
            try:
                out(pub.command(line))
            except Exception as e:  # report, keep serving
                out({"ok": False, "error": "%s: %s" % (type(e).__name__, e)})
    finally:
        pub.close()


if __name__ == "__main__":
    main()
