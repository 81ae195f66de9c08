"""Write a deterministic Kafka Fetch capture for the decode benchmark (~100 MB by default; --size-mb 1024 for 1 GB).

    python benchmarks/make_bench_capture.py OUT.pcapng [--size-mb 100] [--seed 7] [--connections 20]

What is in it (pcapng, two interfaces, written with fetchtool's own writer and TcpConversation):
- ~20 client connections to 3 brokers (all on port 9092), interleaved round-robin;
- TCP profiles: half the connections on a loopback-like interface with 64 KB segments (65,483-byte payloads,
  frames > 65,535 bytes), half on Ethernet with a 1,448-byte MSS; on the Ethernet ones about 1 in 40 messages
  has a duplicated (retransmitted) segment and 1 in 40 has two segments swapped (out of order);
- Fetch v12 requests of 50-500 partitions (KIP-227 sessions: a full fetch creating a session, then incremental
  epochs), responses with the same partitions, up to ~1 MB of records: real magic-2 record batches with valid
  headers and CRCs (one batch built with kafka-python and reused, only baseOffset patched: the CRC does not
  cover it).
Bodies are encoded with fetchtool.protocol.codec and framed (size + header) by fetchtool.protocol.messages.
Same seed and size -> the same file.
"""

from __future__ import annotations

import argparse
import random
import struct
import sys
import time
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

from fetchtool.capture.events import Endpoint
from fetchtool.capture.writer import LINKTYPE_ETHERNET, LINKTYPE_NULL, PcapNgWriter, TcpConversation
from fetchtool.exchange import RequestPartition, ResponsePartition
from fetchtool.protocol import codec, messages
from fetchtool.protocol.headers import FETCH

BROKER_PORT = 9092
VERSION = 12
ETHERNET_MSS = 1448
LOOPBACK_SEGMENT = 65483


def record_batch(records: int, value_size: int) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 22)
    for i in range(records):
        b.append(i, timestamp=1_700_000_000_000 + i, key=None, value=b"v" * value_size, headers=[])
    return bytes(b.build())


class Client:
    """One consumer connection: its partitions, session state and fetch positions."""

    def __init__(self, rng: random.Random, index: int, conv: TcpConversation, loopback: bool):
        self.rng = rng
        self.conv = conv
        self.loopback = loopback
        self.client_id = f"consumer-{index}"
        self.corr = index * 1000
        n = rng.randint(50, 500)
        topics = rng.randint(1, 8)
        self.parts = [(f"topic-{index}-{p % topics}", p // topics) for p in range(n)]
        self.parts.sort()
        self.offsets = {k: rng.randint(0, 1 << 30) for k in self.parts}
        self.session_id = 0
        self.epoch = 0
        self.session_seed = 1_000_000 + index * 7919


def make_fetch(c: Client, batch: bytes, batch_records: int, max_response: int) -> tuple[bytes, bytes, int]:
    """(request frame, response frame, partition entries) for the client's next fetch."""
    rng = c.rng
    c.corr += 1
    full = c.session_id == 0 or c.epoch == 0
    if full:
        req_parts = c.parts
    else:  # incremental: the partitions whose position moved (here: a random share of them, at least 50)
        req_parts = sorted(rng.sample(c.parts, k=max(min(50, len(c.parts)), len(c.parts) * rng.randint(5, 10) // 10)))
    rp = tuple(RequestPartition(t, None, p, c.offsets[(t, p)], 1 << 20, -1, 5, 4) for t, p in req_parts)
    session_id = c.session_id
    request = messages.fetch_request(VERSION, c.corr, c.client_id, session_id, c.epoch, rp)
    # Response: the same partitions (a full response) or those with data; data on a random subset, capped.
    budget = int(max_response * rng.random() ** 6)  # mostly small responses, some near the cap
    rows, blobs = [], []
    for t, p in req_parts:
        blob = None
        if budget >= len(batch) and rng.random() < 0.35:
            nb = min(rng.randint(1, 4), budget // len(batch))
            off = c.offsets[(t, p)]
            pieces = []
            for _ in range(nb):
                pieces.append(struct.pack(">q", off) + batch[8:])
                off += batch_records
            blob = b"".join(pieces)
            budget -= len(blob)
            c.offsets[(t, p)] = off
        elif not full and rng.random() < 0.2:
            continue  # incremental responses leave out partitions with nothing new
        hw = c.offsets[(t, p)] + rng.randint(0, 5000)
        rows.append(ResponsePartition(t, None, p, 0, hw, hw, 0, -1, -1, -1 if rng.random() < 0.9 else 0,
                                      len(blob) if blob else 0, 0, 0, None))
        blobs.append(blob)
    if full:
        c.session_id = c.session_seed
        c.session_seed += 1
    c.epoch = 1 if full else (c.epoch % 0x7FFFFFFF) + 1
    if rng.random() < 0.01:  # now and then a client starts over with a new session
        c.session_id, c.epoch = 0, 0
    resp = codec.FetchResponseBody(throttle_time_ms=0, error_code=0, session_id=c.session_id if full else session_id,
                                   partitions=tuple(rows), records=tuple(blobs))
    response = messages.response_frame(FETCH, VERSION, c.corr, codec.encode_response(FETCH, VERSION, resp))
    return request, response, len(rp) + len(rows)


def generate(path: str | Path, size_mb: float = 100, seed: int = 7, connections: int = 20,
             max_response: int = 1 << 20) -> dict:
    """Write the capture; returns what was written (connections, exchanges, partition entries, bytes)."""
    rng = random.Random(seed)
    target = int(size_mb * (1 << 20))
    batch_records = 40
    batch = record_batch(batch_records, 180)
    brokers = [Endpoint(f"10.9.0.{i + 1}", BROKER_PORT) for i in range(3)]
    stats = {"connections": connections, "exchanges": 0, "partition_entries": 0, "payload_bytes": 0}
    with PcapNgWriter(str(path)) as out:
        lo = out.add_interface(LINKTYPE_NULL, tsresol=9, name="lo")
        eth = out.add_interface(LINKTYPE_ETHERNET, tsresol=9, name="eth0")
        clients = []
        ts = 1_700_000_000.0
        for i in range(connections):
            loopback = i % 2 == 0
            broker = brokers[i % len(brokers)]
            src = Endpoint(broker.ip if loopback else f"10.8.{i // 200}.{i % 200 + 1}", 40000 + i)
            conv = TcpConversation(out, src, broker, interface=lo if loopback else eth,
                                   segment_size=LOOPBACK_SEGMENT if loopback else ETHERNET_MSS,
                                   client_isn=rng.getrandbits(32), server_isn=rng.getrandbits(32))
            ts = conv.handshake(ts)
            clients.append(Client(rng, i, conv, loopback))
        written = 0
        while written < target:
            for c in clients:
                req, resp, entries = make_fetch(c, batch, batch_records, max_response)
                ts = c.conv.send("client", req, ts)
                kw = {}
                if not c.loopback:
                    nseg = -(-len(resp) // ETHERNET_MSS)
                    roll = rng.random()
                    if nseg > 2 and roll < 0.025:
                        kw["duplicate"] = {rng.randrange(nseg)}  # a retransmission
                    elif nseg > 2 and roll < 0.05:
                        k = rng.randrange(nseg - 1)
                        order = list(range(nseg))
                        order[k], order[k + 1] = order[k + 1], order[k]
                        kw["reorder"] = order  # two segments out of order
                ts = c.conv.send("server", resp, ts, **kw)
                ts += 0.0005
                stats["exchanges"] += 1
                stats["partition_entries"] += entries
                written += len(req) + len(resp)
                if written >= target:
                    break
        for c in clients:
            ts = c.conv.close(ts)
    stats["payload_bytes"] = written
    return stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--size-mb", type=float, default=100.0, help="Kafka payload to write, in MiB (default 100)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--connections", type=int, default=20)
    args = ap.parse_args(argv)
    started = time.perf_counter()
    stats = generate(args.out, args.size_mb, args.seed, args.connections)
    took = time.perf_counter() - started
    size = args.out.stat().st_size
    print(f"{args.out}: {size / 1e6:,.1f} MB, {stats['connections']} connections, {stats['exchanges']:,} exchanges, "
          f"{stats['partition_entries']:,} partition entries, written in {took:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
