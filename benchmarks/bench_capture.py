"""Capture-layer throughput: header walk, iter_segments, iter_segments + TCP reassembly.

    python benchmarks/bench_capture.py [--path FILE] [--mb 100] [--connections 20] [--gzip] [--segment-size N]

Writes (with fetchtool's own writer) a ~100 MB Ethernet capture of ~20 interleaved connections carrying
64 KB segments (a small request from each client, large responses from the broker), unless --path names an
existing capture, then prints packets/s and MB/s for each stage (best of --repeat runs).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from fetchtool.capture.events import Endpoint, StreamData
from fetchtool.capture.packets import CaptureStats, iter_segments
from fetchtool.capture.reader import read_records
from fetchtool.capture.reassembly import TcpReassembler
from fetchtool.capture.writer import LINKTYPE_ETHERNET, PcapWriter, TcpConversation


def generate(path: str, megabytes: int, connections: int, compress: bool, segment_size: int = 65483) -> float:
    started = time.perf_counter()
    blob = os.urandom(1 << 20)
    response = blob[: 1 << 20]  # 1 MiB responses -> 17 segments of 64 KB each
    broker = Endpoint("10.1.0.1", 9092)
    with PcapWriter(path, LINKTYPE_ETHERNET, compress=compress) as out:
        convs = [TcpConversation(out, Endpoint(f"10.2.0.{i + 1}", 40000 + i), broker, segment_size=segment_size,
                                 client_isn=i * 7919, server_isn=0xFFFF0000 + i)  # one ISN set wraps
                 for i in range(connections)]
        ts = 1_700_000_000.0
        for conv in convs:
            ts = conv.handshake(ts)
        rounds = max(1, megabytes * (1 << 20) // (len(response) * connections))
        for _ in range(rounds):
            for conv in convs:
                ts = conv.send("client", blob[:120], ts)
                ts = conv.send("server", response, ts)
        for conv in convs:
            ts = conv.close(ts)
    return time.perf_counter() - started


def stage_walk(path: str) -> tuple[int, int]:
    packets = nbytes = 0
    for record in read_records(path):
        packets += 1
        nbytes += record[6]
    return packets, nbytes


def stage_segments(path: str) -> tuple[int, int]:
    stats = CaptureStats()
    for _seg in iter_segments(path, stats):
        pass
    return stats.packets, stats.bytes


def stage_reassembly(path: str) -> tuple[int, int]:
    stats = CaptureStats()
    r = TcpReassembler()
    delivered = 0
    feed = r.feed
    last = None
    for seg in iter_segments(path, stats):
        last = seg
        for ev in feed(seg):
            if type(ev) is StreamData:
                delivered += len(ev.data)
    if last is not None:
        r.finish(last.frame, last.ts)
    return stats.packets, stats.bytes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--path", help="capture to read (generated there if it does not exist)")
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--connections", type=int, default=20)
    ap.add_argument("--gzip", action="store_true", help="generate a gzip-compressed capture")
    ap.add_argument("--segment-size", type=int, default=65483, help="TCP payload per packet (1448: Ethernet MTU)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    tmp = None
    path = args.path
    if path is None:
        tmp = tempfile.TemporaryDirectory()
        path = os.path.join(tmp.name, "bench.pcap.gz" if args.gzip else "bench.pcap")
    if not os.path.exists(path):
        took = generate(path, args.mb, args.connections, args.gzip, args.segment_size)
        print(f"generated {path}: {os.path.getsize(path) / 1e6:.1f} MB in {took:.2f} s")
    size_mb = os.path.getsize(path) / 1e6
    for name, stage in (("header walk", stage_walk), ("iter_segments", stage_segments),
                        ("iter_segments + reassembly", stage_reassembly)):
        best = float("inf")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            packets, _nbytes = stage(path)
            best = min(best, time.perf_counter() - t0)
        print(f"{name:28s} {packets:8d} packets  {best * 1000:8.1f} ms  {packets / best:10,.0f} packets/s  "
              f"{size_mb / best:8.0f} MB/s  {best / packets * 1e6:6.2f} us/packet")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
