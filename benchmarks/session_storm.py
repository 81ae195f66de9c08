"""A session storm capture: one client opens N fetch sessions, one per connection, and prints what it wrote.

    python benchmarks/session_storm.py /tmp/storm.pcap [--sessions 100000] [--incremental 0.5] [--seed 18]
        [--ports 64512]

Each connection (client 10.1.0.5, a new ephemeral port each time, ports reused after 64,512 connections as a
real host's are, or after --ports; broker 10.2.0.1:9092): TCP handshake, a full Fetch v12 (session 0, epoch 0)
of a few partitions answered with a new session id, then (for the `--incremental` share) one incremental fetch
with epoch 1, then FIN from both sides. Real wire bytes: Ethernet/IPv4/TCP written with fetchtool's PcapWriter and
TcpConversation, bodies encoded by fetchtool.protocol.codec; tshark 4.4 decodes every Fetch of it.

The last line printed is the truth as JSON (connections, sessions, exchanges, incremental fetches, bytes), for
tests and benchmarks to compare a report's counts with.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

from fetchtool.capture.events import Endpoint
from fetchtool.capture.writer import LINKTYPE_ETHERNET, PcapWriter, TcpConversation
from fetchtool.exchange import RequestPartition, ResponsePartition
from fetchtool.protocol import codec, messages
from fetchtool.protocol.headers import FETCH

VERSION = 12
CLIENT_ID = "storm-consumer"
CLIENT_HOST = "10.1.0.5"
BROKER = Endpoint("10.2.0.1", 9092)
TOPIC = "orders"
FIRST_SESSION_ID = 1_000_000


def _response(corr: int, session_id: int, parts: list[int], offsets: dict[int, int], full: bool) -> bytes:
    rows = tuple(ResponsePartition(TOPIC, None, p, 0, offsets[p] + 10, offsets[p] + 10, 0, -1, -1, -1, 0, 0, 0, None)
                 for p in parts)  # fmt: skip
    body = codec.FetchResponseBody(throttle_time_ms=0, error_code=0, session_id=session_id, partitions=rows,
                                   records=(None,) * len(rows))
    return messages.response_frame(FETCH, VERSION, corr, codec.encode_response(FETCH, VERSION, body))


def _request(corr: int, session_id: int, epoch: int, parts: list[int], offsets: dict[int, int]) -> bytes:
    rp = tuple(RequestPartition(TOPIC, None, p, offsets[p], 1 << 20, -1, 5, 4) for p in parts)
    return messages.fetch_request(VERSION, corr, CLIENT_ID, session_id, epoch, rp)


def generate(path: str | Path, sessions: int = 100_000, incremental: float = 0.5, seed: int = 18,
             partitions: int = 3, ports: int = 64_512) -> dict:
    """Write the capture; returns the truth (what a report should count)."""
    rng = random.Random(seed)
    truth = {"connections": 0, "sessions": 0, "exchanges": 0, "full_fetches": 0, "incremental_fetches": 0,
             "client_id": CLIENT_ID, "client_host": CLIENT_HOST, "broker": f"{BROKER.ip}:{BROKER.port}",
             "first_session_id": FIRST_SESSION_ID, "last_session_id": FIRST_SESSION_ID + sessions - 1}
    ts = 1_700_000_000.0
    with PcapWriter(str(path), LINKTYPE_ETHERNET, nanosecond=True) as out:
        for i in range(sessions):
            port = 1024 + i % ports
            conv = TcpConversation(out, Endpoint(CLIENT_HOST, port), BROKER, segment_size=1448,
                                   client_isn=rng.getrandbits(32), server_isn=rng.getrandbits(32), step=20e-6)
            ts = conv.handshake(ts)
            parts = list(range(partitions))
            offsets = {p: rng.randrange(1 << 30) for p in parts}
            session_id = FIRST_SESSION_ID + i
            ts = conv.send("client", _request(1, 0, 0, parts, offsets), ts)
            ts = conv.send("server", _response(1, session_id, parts, offsets, True), ts + 0.001)
            truth["exchanges"] += 1
            truth["full_fetches"] += 1
            if rng.random() < incremental:
                ts = conv.send("client", _request(2, session_id, 1, [], offsets), ts + 0.002)
                ts = conv.send("server", _response(2, session_id, [], offsets, False), ts + 0.001)
                truth["exchanges"] += 1
                truth["incremental_fetches"] += 1
            ts = conv.close(ts + 0.0005)
            truth["connections"] += 1
            truth["sessions"] += 1
            ts += 0.004  # the next connection 5-10 ms after this one started
    return truth


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--sessions", type=int, default=100_000)
    ap.add_argument("--incremental", type=float, default=0.5, help="share of connections that fetch again (0-1)")
    ap.add_argument("--seed", type=int, default=18)
    ap.add_argument("--ports", type=int, default=64_512, help="client ports, each used again after this many "
                                                               "connections")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    truth = generate(args.out, args.sessions, args.incremental, args.seed, ports=args.ports)
    took = time.perf_counter() - started
    print(f"{args.out}: {args.out.stat().st_size / 1e6:,.1f} MB, {truth['connections']:,} connections, "
          f"{truth['exchanges']:,} Fetch exchanges, written in {took:.1f} s", file=sys.stderr)
    print(json.dumps(truth))
    return 0


if __name__ == "__main__":
    sys.exit(main())
