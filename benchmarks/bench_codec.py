"""Fetch body decode cost per 181-partition response/request: kio (native) vs kafka-python vs fetchtool's rows
through kio (kio entities + conversion to Exchange rows + record-batch walk) vs fetchtool's flexible-version fast
path (straight to rows; what the codec uses for the plain shape), plus the whole protocol layer (framing, pairing,
decode) on a synthetic stream of Fetch v12 exchanges (50-500 partitions, responses up to ~1 MB).

    python benchmarks/bench_codec.py [--exchanges 300]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "protocol"))

from kafka.protocol.consumer.fetch import FetchRequest as KpReq  # noqa: E402
from kafka.protocol.consumer.fetch import FetchResponse as KpResp  # noqa: E402
from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402
from kio.schema.fetch.v12.request import FetchRequest as KioReq  # noqa: E402
from kio.schema.fetch.v12.response import FetchResponse as KioResp  # noqa: E402
from kio.serial import entity_reader  # noqa: E402

from fetchtool.exchange import RequestPartition, ResponsePartition  # noqa: E402
from fetchtool.protocol import _fetch_flex, _fetch_kio, codec  # noqa: E402


def batch(n: int) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=1_700_000_000_000, key=None, value=b"x" * 200, headers=[])
    return bytes(b.build())


def bodies(n: int, with_records: int, blob: bytes):
    req = codec.FetchRequestBody(max_wait_ms=500, min_bytes=1, max_bytes=52428800, session_id=0, session_epoch=0,
                                 partitions=tuple(RequestPartition(f"topic-{p // 20}", None, p, 1000 + p, 1048576,
                                                                   -1, 3, -1) for p in range(n)))
    parts = tuple(ResponsePartition(f"topic-{p // 20}", None, p, 0, 5000, 5000, 0, -1, -1, -1, 0, 0, 0, None)
                  for p in range(n))
    recs = tuple(blob if p < with_records else None for p in range(n))
    return req, codec.FetchResponseBody(0, 0, 123, parts, recs)


def timeit(fn, repeat: int) -> float:
    fn()
    t = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t) / repeat * 1e6


def per_message(repeat: int) -> None:
    blob = batch(20)
    req, resp = bodies(181, 40, blob)
    rq, rs = codec.encode_request(1, 12, req), codec.encode_response(1, 12, resp)
    kio_rq, kio_rs = entity_reader(KioReq), entity_reader(KioResp)
    print(f"Fetch v12, 181 partitions (40 with {len(blob):,} B of records); request {len(rq):,} B, response {len(rs):,} B")
    rows = [
        ("kio native reader", timeit(lambda: kio_rq(rq, 0), repeat), timeit(lambda: kio_rs(rs, 0), repeat)),
        ("kafka-python 3.0.12", timeit(lambda: KpReq.decode(rq, version=12), repeat),
         timeit(lambda: KpResp.decode(rs, version=12), repeat)),
        ("rows through kio (entities + rows + batch walk)",
         timeit(lambda: _fetch_kio.request_from_kio(codec._kio_read(1, 12, "request", rq), 12, None), repeat),
         timeit(lambda: _fetch_kio.response_from_kio(codec._kio_read(1, 12, "response", rs), 12, None, False),
                repeat)),
        ("rows by the fast path (+ batch walk)", timeit(lambda: _fetch_flex.read_request(rq, 12, None), repeat),
         timeit(lambda: _fetch_flex.read_response(rs, 12, None, False), repeat)),
        ("fetchtool codec (what decode uses)", timeit(lambda: codec.decode_request(1, 12, rq), repeat),
         timeit(lambda: codec.decode_response(1, 12, rs), repeat)),
    ]
    assert _fetch_flex.read_response(rs, 12, None, True) == _fetch_kio.response_from_kio(
        codec._kio_read(1, 12, "response", rs), 12, None, True)
    print(f"{'decoder':48} {'request us':>11} {'response us':>12} {'us/partition (resp)':>20}")
    for name, a, b in rows:
        print(f"{name:48} {a:11.1f} {b:12.1f} {b / 181:20.2f}")


def whole_layer(exchanges: int) -> None:
    from kafka_wire import Link, request_frame, response_frame

    from fetchtool.decoder import decode_events
    from fetchtool.protocol.report import DecodeReport

    rnd = random.Random(7)
    blob = batch(50)  # ~11 KB
    link = Link()
    events = []
    entries = 0
    for corr in range(1, exchanges + 1):
        n = rnd.randint(50, 500)
        req, resp = bodies(n, rnd.randint(0, min(n, 90)), blob)
        entries += 2 * n
        events += link.send(request_frame(1, 12, corr, req), chunk=65483)
        events += link.reply(response_frame(1, 12, corr, resp), chunk=65483)
    total = sum(len(e.data) for e in events)
    t = time.perf_counter()
    rep = DecodeReport()
    out = sum(1 for _ in decode_events(events, "bench", frozenset({9092}), rep))
    dt = time.perf_counter() - t
    print(f"\nprotocol layer (framing + pairing + decode), {exchanges} Fetch v12 exchanges, {entries:,} partition "
          f"entries, {total / 1e6:.1f} MB in 64 KB pieces:")
    print(f"  {dt:.3f} s  = {total / dt / 1e6:.0f} MB/s, {dt / entries * 1e6:.2f} us per partition entry, "
          f"{out} exchanges")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=300)
    ap.add_argument("--exchanges", type=int, default=300)
    a = ap.parse_args()
    per_message(a.repeat)
    whole_layer(a.exchanges)


if __name__ == "__main__":
    main()
