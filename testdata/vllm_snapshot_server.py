#!/usr/bin/python3
"""Emulates a vLLM engine with KV-cache snapshots on real libzmq, for
kvroute's snapshot interop test. Written from the wire format of vLLM's
KVEventSnapshotRecorder (vllm/distributed/kv_events_snapshot.py, the
snapshot work of vllm-project/vllm#57789) and its example subscriber; no
vLLM code is used.

The engine has published batches 0..S (--snapshot-seq) before anyone
subscribed; each stored the pool tests' blocks: batch s holds --blocks
blocks of --block-size tokens, hashes (s+1)*1000+j, no parent, tokens
(s*7919+i) % 50000.

Sockets:
  * PUB bound on tcp://127.0.0.1:<random>: from sequence S+1 on, one such
    batch every --interval seconds, as [topic, seq8, payload];
  * snapshot ROUTER bound on tcp://127.0.0.1:<random>: a request is
    [identity, b"", b"snapshot"] (anything else is ignored, as vLLM does);
    the reply is [identity, b"", seq8 signed, publisher_id (16 bytes),
    chunk...]. The first --unavailable requests are answered with sequence
    -2 and no chunks ("unavailable, retry later"). The chunks follow vLLM's
    export: every block stored once with its tokens, then token-less stores
    that set each block's residency count (one here), then the removal of
    the teaching stores; at most 256 events per chunk, each chunk a msgpack
    [ts, events, data_parallel_rank] with map events (msgspec, omit_defaults).

It prints one JSON line {"pub": ..., "snapshot": ..., "publisher_id": hex}
and runs until stdin closes; then it prints {"requests": N, "unavailable": U}.
"""

import argparse
import json
import sys
import threading
import time
import uuid

import msgpack
import zmq

EVENTS_PER_CHUNK = 256


def block_hashes(seq, blocks):
    return [(seq + 1) * 1000 + j for j in range(blocks)]


def token_ids(seq, blocks, block_size):
    return [(seq * 7919 + i) % 50000 for i in range(blocks * block_size)]


def stored(seq, blocks, block_size):
    return {"type": "BlockStored", "block_hashes": block_hashes(seq, blocks),
            "parent_block_hash": None, "token_ids": token_ids(seq, blocks, block_size),
            "block_size": block_size, "lora_id": None, "medium": "GPU", "lora_name": None,
            "group_idx": 0, "kv_cache_spec_kind": "full_attention"}


def pack(events):
    return msgpack.packb([time.time(), events, 0], use_bin_type=True)


def export(seq, blocks, block_size):
    events = [stored(s, blocks, block_size) for s in range(seq + 1)]
    for s in range(seq + 1):
        events.append({"type": "BlockStored", "block_hashes": block_hashes(s, blocks),
                       "parent_block_hash": None, "token_ids": [], "block_size": 0,
                       "lora_id": None, "medium": "GPU", "lora_name": None, "group_idx": 0})
    for s in range(seq + 1):
        events.append({"type": "BlockRemoved", "block_hashes": block_hashes(s, blocks),
                       "medium": "GPU", "group_idx": 0})
    return [pack(events[i:i + EVENTS_PER_CHUNK]) for i in range(0, len(events), EVENTS_PER_CHUNK)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--snapshot-seq", type=int, default=99)
    ap.add_argument("--blocks", type=int, default=2)
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--unavailable", type=int, default=0)
    ap.add_argument("--interval", type=float, default=0.05)
    ap.add_argument("--topic", default="")
    args = ap.parse_args()

    ctx = zmq.Context.instance()
    pub = ctx.socket(zmq.PUB)
    pub.setsockopt(zmq.LINGER, 0)
    pub_port = pub.bind_to_random_port("tcp://127.0.0.1")
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    snap_port = router.bind_to_random_port("tcp://127.0.0.1")
    publisher_id = uuid.uuid4().bytes
    lock = threading.Lock()
    state = {"seq": args.snapshot_seq, "requests": 0, "unavailable": 0}
    stop = threading.Event()

    def publish():
        while not stop.wait(args.interval):
            with lock:
                state["seq"] += 1
                seq = state["seq"]
                payload = pack([stored(seq, args.blocks, args.block_size)])
                pub.send_multipart([args.topic.encode(), seq.to_bytes(8, "big"), payload])

    def serve():
        poller = zmq.Poller()
        poller.register(router, zmq.POLLIN)
        while not stop.is_set():
            if not dict(poller.poll(20)):
                continue
            frames = router.recv_multipart()
            if len(frames) != 3 or frames[1] or frames[2] != b"snapshot":
                continue
            with lock:
                state["requests"] += 1
                if state["unavailable"] < args.unavailable:
                    state["unavailable"] += 1
                    reply = [(-2).to_bytes(8, "big", signed=True), publisher_id]
                else:
                    seq = state["seq"]
                    reply = [seq.to_bytes(8, "big", signed=True), publisher_id] + export(seq, args.blocks, args.block_size)
                router.send_multipart(frames[:2] + reply)

    threads = [threading.Thread(target=publish, daemon=True), threading.Thread(target=serve, daemon=True)]
    sys.stdout.write(json.dumps({"pub": "tcp://127.0.0.1:%d" % pub_port,
                                 "snapshot": "tcp://127.0.0.1:%d" % snap_port,
                                 "publisher_id": publisher_id.hex()}) + "\n")
    sys.stdout.flush()
    for t in threads:
        t.start()
    sys.stdin.read()
    stop.set()
    for t in threads:
        t.join(timeout=2)
    with lock:
        sys.stdout.write(json.dumps({"requests": state["requests"], "unavailable": state["unavailable"]}) + "\n")
        sys.stdout.flush()
    pub.close()
    router.close()


if __name__ == "__main__":
    main()
