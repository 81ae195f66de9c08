"""Consumers that fetch the same partitions at the same offsets from one broker and get the same data, so their
bytes differ only by how they use fetch sessions: the scenario behind the exact savings tests.

A Java-like consumer with a working session, a sessionless one (epoch -1) and, if named, one that keeps a working
session but lists every partition in every incremental request, changed or not.
"""

from __future__ import annotations

from fetchtool.sessions import FetchMetadata
from fetchtool.synth.world import JavaLikeClient, World

PARTITIONS = [("orders", p) for p in range(20)] + [("payments", p) for p in range(5)]


def write_capture(path, java_id: str, plain_id: str, resend_id: str | None = None, version: int = 12,
                  rounds: int = 10) -> None:
    w = World(path)
    b = w.broker()
    for tp in PARTITIONS:
        b.produce(*tp, 3)
    java = JavaLikeClient(w.connect(b, "10.0.0.1", 40001, java_id), PARTITIONS, version=version)
    plain = w.connect(b, "10.0.0.2", 40002, plain_id)
    resend = w.connect(b, "10.0.0.3", 40003, resend_id) if resend_id else None
    positions = {tp: 0 for tp in PARTITIONS}
    meta = FetchMetadata.INITIAL
    for i in range(rounds):
        java.poll()
        req = plain.fetch(FetchMetadata.LEGACY, dict(positions), version=version)
        if resend is not None:
            again = resend.fetch(meta, dict(positions), version=version)
            assert again.outcome.error_code == 0 and again.outcome.session_id
            meta = FetchMetadata(again.outcome.session_id, i + 1)
        for tip, r in req.outcome.partitions:
            if r.records_size:
                key = (tip.topic, tip.partition)
                positions[key] = min(r.high_watermark, positions[key] + b.batch_records)
        b.produce(*PARTITIONS[(i * 7) % len(PARTITIONS)], 2)   # a couple of partitions change per round
        b.produce(*PARTITIONS[(i * 3 + 1) % len(PARTITIONS)], 9)
        w.advance(1.0)
    assert positions == java.positions   # the consumers really fetched the same offsets
    w.close()
