"""The savings model sums response sizes per partition when client keys and engine keys correspond one to one
(the usual case), and sizes them entry by entry otherwise. Both must give the same figures on any exchange
stream: odd ones included (v4 to v13, topic ids with and without names, partitions listed twice, responses
with partitions nobody asked for, aborted transactions, diverging epochs, session errors, missing responses).
The estimator must also survive being pickled mid-stream (the Spark engine ships estimators between processes).
"""

from __future__ import annotations

import pickle
import random

import pytest

from fetchtool.analysis.savings.estimator import SavingsEstimator
from fetchtool.analysis.savings.model import StreamModel
from fetchtool.decoder import decode_capture
from fetchtool.exchange import Exchange, ForgottenPartition, RequestPartition, ResponsePartition

TOPICS = {"orders": "5f1a0e4c-0d4e-4c3b-9a57-000000000001", "payments": "5f1a0e4c-0d4e-4c3b-9a57-000000000002",
          "audit": "5f1a0e4c-0d4e-4c3b-9a57-000000000003"}


def _names(rng: random.Random, version: int, topic: str) -> tuple[str | None, str | None]:
    if version < 13:
        return topic, None
    # v13+: the id always; the name only once a Metadata response named it (not always, in a real capture)
    return (topic if rng.random() < 0.3 else None), TOPICS[topic]


def _stream(seed: int, n: int = 80) -> list[Exchange]:
    rng = random.Random(seed)
    versions = rng.choice([[12], [13], [4, 7], [12, 13], [7, 12, 13]])
    pool = [(t, p) for t in TOPICS for p in range(rng.randint(1, 6))]
    out = []
    t = 1_700_000_000.0
    epoch = 0
    for i in range(n):
        version = rng.choice(versions)
        roll = rng.random()
        if roll < 0.15:
            sid, ep = 0, -1                      # sessionless
        elif roll < 0.35:
            sid, ep, epoch = 0, 0, 0             # full
        elif roll < 0.4:
            sid, ep = 77, -1                     # close
        else:
            epoch += 1
            sid, ep = 77, epoch                  # incremental
        wanted = rng.sample(pool, rng.randint(0, len(pool)))
        if wanted and rng.random() < 0.1:
            wanted.append(rng.choice(wanted))    # a partition listed twice
        req = tuple(RequestPartition(*_names(rng, version, tp[0]), tp[1], rng.randint(0, 3), 1048576, -1,
                                     rng.choice([-1, 5]), -1) for tp in wanted)
        forgotten = ()
        if ep > 0 and rng.random() < 0.3:
            forgotten = tuple(ForgottenPartition(*_names(rng, version, tp[0]), tp[1])
                              for tp in rng.sample(pool, rng.randint(1, len(pool))))
        error = rng.choice([0] * 12 + [70, 71])
        missing = rng.random() < 0.05
        resp = None
        if not missing:
            if error:
                resp = ()
            else:
                rows = [tp for tp in wanted if rng.random() < 0.7]
                if rng.random() < 0.1:
                    rows.append(rng.choice(pool))        # a partition the request did not ask for
                if rows and rng.random() < 0.1:
                    rows.append(rng.choice(rows))        # a partition answered twice
                resp = tuple(ResponsePartition(
                    *_names(rng, version, tp[0]), tp[1], rng.choice([0] * 15 + [1, 6]), rng.randint(0, 3),
                    rng.randint(0, 3), rng.choice([0, 0, 2]), rng.choice([-1] * 9 + [1]),
                    rng.choice([-1] * 9 + [3]), rng.choice([-1, 0, 0, 2]),
                    rng.choice([0, 0, 0, 60, 200, 20000]), 0, 0, None) for tp in rows)
        t += 0.01
        out.append(Exchange(
            file="paths.pcap", conn=1, request_frame=2 * i + 1, response_frame=None if missing else 2 * i + 2,
            ts=t, response_ts=None if missing else t + 0.005, client="10.0.0.1:40000", broker="10.0.0.9:9092",
            api_key=1, api_version=version, correlation_id=i, client_id="consumer-1", client_software=None,
            replica_id=-1, session_id=sid, session_epoch=ep, max_wait_ms=500, min_bytes=1, max_bytes=52428800,
            isolation_level=0, rack_id=None, error_code=None if missing else error,
            response_session_id=None if missing else (rng.choice([0, 77]) if ep == 0 else sid),
            throttle_time_ms=None if missing else 0, request_bytes=4000, response_bytes=None if missing else 30000,
            request_partitions=req, forgotten_partitions=forgotten, response_partitions=resp))
    return out


def _run(exchanges, entry_by_entry: bool) -> list:
    model = StreamModel("10.0.0.1:40000", "10.0.0.9:9092")
    if entry_by_entry:
        model.simple = False
    out = []
    for ex in exchanges:
        try:
            out.append(model.feed(ex))
        except Exception as exc:  # noqa: BLE001 - both paths must fail alike (the estimator counts it)
            out.append(type(exc).__name__)
            model = StreamModel("10.0.0.1:40000", "10.0.0.9:9092")
            if entry_by_entry:
                model.simple = False
    return out


@pytest.mark.parametrize("seed", range(40))
def test_summed_and_entry_by_entry_sizes_agree_on_odd_streams(seed):
    exchanges = _stream(seed)
    fast, general = _run(exchanges, False), _run(exchanges, True)
    assert fast == general
    assert sum(1 for s in fast if isinstance(s, str)) <= 2   # the stream really was modelled


def test_summed_and_entry_by_entry_sizes_agree_on_the_scenario_captures(captures_dir=None):
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "captures"
    files = sorted(root.glob("**/*.pcap")) + sorted(root.glob("**/*.pcapng"))
    assert files
    for f in files:
        streams: dict[tuple, list] = {}
        for ex in decode_capture([str(f)]):
            if isinstance(ex, Exchange) and ex.api_key == 1:
                streams.setdefault((ex.client, ex.broker), []).append(ex)
        for exchanges in streams.values():
            fast, general = _run(exchanges, False), _run(exchanges, True)
            assert fast == general, f
            assert not any(isinstance(s, str) for s in fast), f


def test_an_estimator_pickled_mid_stream_carries_on_exactly():
    exchanges = _stream(3, 120) + _stream(11, 120)
    whole = SavingsEstimator()
    for ex in exchanges:
        whole.feed(ex)
    first = SavingsEstimator()
    for ex in exchanges[:100]:
        first.feed(ex)
    resumed = pickle.loads(pickle.dumps(first))
    for ex in exchanges[100:]:
        resumed.feed(ex)
    assert resumed.result().to_json() == whole.result().to_json()


def test_frame_sizes_from_topic_runs_equal_those_from_keys():
    from fetchtool.analysis.savings import sizes as size

    rng = random.Random(5)
    for version in (4, 7, 12, 13, 16):
        for _ in range(200):
            # runs of one topic (as on the wire), some long enough (>= 127) to grow a compact length prefix
            keys = [k for _ in range(rng.randint(0, 6))
                    for k in [rng.choice(["a", "bb", "", None, "ccc"])] * rng.choice([1, 3, 40, 130, 300])]
            if rng.random() < 0.3:
                rng.shuffle(keys)   # a topic at almost every entry (an incremental response in session order)
            runs = size.topic_runs(keys)
            assert sum(k for _, k in runs) == len(keys)
            assert size.request_frame_size(version, "c", -1, None, (), (), runs) == \
                size.request_frame_size(version, "c", -1, None, keys)
            records = [rng.choice([0, 100, 127, 20000]) for _ in keys]
            assert size.response_frame_size(version, (), records, [], [], runs) == \
                size.response_frame_size(version, keys, records)
