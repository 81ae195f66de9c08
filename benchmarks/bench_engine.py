"""Session engine throughput: full and incremental contexts per second.

A cache holding 1,000 live sessions (Kafka's default slots, 8 shards); each measured exchange is
new_context(...) + update_and_generate_response(...) on one session, as the broker calls them. Incremental
exchanges change a few partitions (HW moves on 2 of them, 1 returns records), so the engine's cost is the
per-session-partition scan Kafka also does, not response building. Results are reused objects passed in
session order with the keys ctx.partitions() returned, as a broker reading partitions() in order does.
"changed-only" gives the same exchanges as a ReadResults that says which partitions changed, so the incremental
response visits only those; "walked" is the same input with walk_all=True (every partition, as Kafka does).

    python benchmarks/bench_engine.py [--seconds 1.5]
"""

from __future__ import annotations

import argparse
import random
import time
import uuid

from fetchtool.sessions import (FetchManager, FetchMetadata, FetchSessionCache, PartitionData, PartitionResult,
                                TopicIdPartition)
from fetchtool.sessions.partitions import ReadResults

LIVE_SESSIONS = 1000
VERSION = 17


def build(partitions_per_session: int):
    rng = random.Random(1)
    topic_id = uuid.UUID(int=rng.getrandbits(128))
    names = {topic_id: "bench"}
    cache = FetchSessionCache(max_slots=LIVE_SESSIONS, shards=8, eviction_ms=120_000, rng=rng)
    manager = FetchManager(cache)
    tps = [TopicIdPartition(topic_id, "bench", p) for p in range(partitions_per_session)]
    data = {tp: PartitionData(0, topic_id=topic_id) for tp in tps}
    steady = PartitionResult(high_watermark=100, last_stable_offset=100, log_start_offset=0)
    results = {tp: steady for tp in tps}
    sessions = []
    for _ in range(LIVE_SESSIONS):
        ctx = manager.new_context(0, VERSION, FetchMetadata.INITIAL, False, data, [], names)
        sid = ctx.update_and_generate_response(0, results).session_id
        assert sid
        sessions.append([sid, 1])
    assert cache.size == LIVE_SESSIONS
    return cache, manager, names, tps, data, results, sessions


def _rate(seconds: float, batch: int, step) -> tuple[float, int]:
    """Calls step(ops, now) in batches of `batch` until `seconds` pass, `ops` counting the calls and `now` the
    engine's clock (ms) from 1: (calls per second, calls)."""
    ops, now = 0, 1
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()
    while time.perf_counter() < deadline:
        for _ in range(batch):
            step(ops, now)
            ops += 1
            now += 1
    return ops / (time.perf_counter() - start), ops


def _changing(tps: list, n_parts: int, ops: int) -> tuple:
    """The two partitions of a session that change between its fetches: one returns records, another's high
    watermark moves (a different pair each round of the sessions)."""
    rnd = ops // LIVE_SESSIONS
    return tps[rnd % n_parts], tps[(rnd + 7) % n_parts]


def bench_incremental(n_parts: int, seconds: float) -> tuple[float, float]:
    cache, manager, names, tps, data, results, sessions = build(n_parts)
    # Each session sees its own partition results (disjoint consumers); between two fetches of a session a few
    # of its partitions change: one returns records, another's high watermark moves.
    per_session = [dict(results) for _ in sessions]
    sent = 0

    def fetch(ops: int, now: int) -> None:
        nonlocal sent
        i = ops % LIVE_SESSIONS
        s, res = sessions[i], per_session[i]
        ctx = manager.new_context(now, VERSION, FetchMetadata(s[0], s[1]), False, {}, (), names)
        a, b = _changing(tps, n_parts, ops)
        res[a] = PartitionResult(high_watermark=100 + ops, log_start_offset=0, records_size=512)
        res[b] = PartitionResult(high_watermark=100 + ops, log_start_offset=0)
        out = ctx.update_and_generate_response(now, res)
        assert out.error_code == 0
        sent += len(out.partitions)
        # Delivered: quiet again. Like a broker that builds results from ctx.partitions(), keep the results
        # in session order (the engine moved `a` to the end), which is the engine's no-hash fast path.
        del res[a]
        res[a] = PartitionResult(high_watermark=100 + ops, log_start_offset=0)
        s[1] += 1

    rate, ops = _rate(seconds, 200, fetch)
    return rate, sent / ops


def bench_full(n_parts: int, seconds: float) -> float:
    cache, manager, names, tps, data, results, sessions = build(n_parts)

    def fetch(ops: int, now: int) -> None:
        # A consumer re-establishing its session: (id, 0) closes the old one, the response creates a new one,
        # so the cache stays at 1,000 live sessions.
        s = sessions[ops % LIVE_SESSIONS]
        ctx = manager.new_context(now, VERSION, FetchMetadata(s[0], 0), False, data, (), names)
        out = ctx.update_and_generate_response(now, results)
        assert out.session_id
        s[0], s[1] = out.session_id, 1

    rate, _ = _rate(seconds, 20, fetch)
    cache.drain_events()
    assert cache.size == LIVE_SESSIONS
    return rate


def bench_incremental_changed(n_parts: int, seconds: float, walk_all: bool = False) -> tuple[float, float]:
    """bench_incremental's exchanges, with results a broker that knows what changed gives as a ReadResults derived
    from the session's previous ones (a copy of the previous results, the changed partitions re-set at the end):
    the engine visits only those. ``walk_all`` walks every partition instead (Kafka's way) on the same input."""
    cache, manager, names, tps, data, results, sessions = build(n_parts)
    # The first incremental response of each session walks (it has nothing to derive from), then the chain starts.
    previous = []
    for s in sessions:
        first = ReadResults(results)
        ctx = manager.new_context(0, VERSION, FetchMetadata(s[0], s[1]), False, {}, (), names)
        ctx.update_and_generate_response(0, first)
        s[1] += 1
        previous.append(first)
    sent = 0

    def fetch(ops: int, now: int) -> None:
        nonlocal sent
        i = ops % LIVE_SESSIONS
        s, before = sessions[i], previous[i]
        ctx = manager.new_context(now, VERSION, FetchMetadata(s[0], s[1]), False, {}, (), names)
        a, b = _changing(tps, n_parts, ops)
        res = ReadResults(before, before)
        changed: list = []
        for tp, result in ((a, PartitionResult(high_watermark=100 + ops, log_start_offset=0, records_size=512)),
                           (b, PartitionResult(high_watermark=100 + ops, log_start_offset=0))):
            del res[tp]
            res[tp] = result
            changed += (tp, result)
        # The partition that returned records last time is quiet again (its result changed back).
        last_a = tps[(ops // LIVE_SESSIONS - 1) % n_parts]
        if last_a is not a and last_a is not b:
            quiet = PartitionResult(high_watermark=res[last_a].high_watermark, log_start_offset=0)
            del res[last_a]
            res[last_a] = quiet
            changed += (last_a, quiet)
        res.changed = tuple(changed)
        before.since = None          # only one step of the chain is needed: let the older results go
        out = ctx.update_and_generate_response(now, res, walk_all=walk_all)
        assert out.error_code == 0
        sent += len(out.partitions)
        previous[i] = res
        s[1] += 1

    rate, ops = _rate(seconds, 200, fetch)
    return rate, sent / ops


def bench_incremental_partitions_only(n_parts: int, seconds: float) -> float:
    """Quiet sessions: the broker asks ctx.partitions() (what to read), nothing changed since the last fetch."""
    cache, manager, names, tps, data, results, sessions = build(n_parts)

    def fetch(ops: int, now: int) -> None:
        s = sessions[ops % LIVE_SESSIONS]
        ctx = manager.new_context(now, VERSION, FetchMetadata(s[0], s[1]), False, {}, (), names)
        ctx.partitions()
        ctx.update_and_generate_response(now, results)
        s[1] += 1

    return _rate(seconds, 200, fetch)[0]


def engine_costs(n_parts: int, iterations: int = 5000) -> tuple[float, float, float]:
    """Microseconds per call on one quiet session: new_context, update_and_generate_response, partitions()."""
    cache, manager, names, tps, data, results, sessions = build(n_parts)
    s = sessions[0]
    t0 = time.perf_counter()
    for i in range(iterations):
        ctx = manager.new_context(i, VERSION, FetchMetadata(s[0], s[1]), False, {}, (), names)
        s[1] += 1
    t1 = time.perf_counter()
    for i in range(iterations):
        ctx.update_and_generate_response(i, results)
    t2 = time.perf_counter()
    for _ in range(iterations):
        ctx.partitions()
    t3 = time.perf_counter()
    return tuple((b - a) / iterations * 1e6 for a, b in ((t0, t1), (t1, t2), (t2, t3)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=1.5)
    args = ap.parse_args()
    print(f"session engine, {LIVE_SESSIONS} live sessions in an 8-shard cache, Fetch v{VERSION}")
    print(f"{'partitions/session':>18} {'full ctx/s':>12} {'incr ctx/s':>12} {'(partitions/resp)':>17} "
          f"{'incr+partitions()/s':>20} {'changed-only/s':>15} {'same, walked/s':>15}")
    for n in (100, 1000):
        full = bench_full(n, args.seconds)
        incr, per_resp = bench_incremental(n, args.seconds)
        incr_p = bench_incremental_partitions_only(n, args.seconds)
        changed, _ = bench_incremental_changed(n, args.seconds)
        walked, _ = bench_incremental_changed(n, args.seconds, walk_all=True)
        print(f"{n:>18} {full:>12,.0f} {incr:>12,.0f} {per_resp:>17.1f} {incr_p:>20,.0f} {changed:>15,.0f}"
              f" {walked:>15,.0f}")
    print("engine cost per call on a quiet session (us): new_context / update_and_generate_response / partitions()")
    for n in (10, 100, 1000):
        nc, up, pa = engine_costs(n)
        print(f"{n:>18} partitions: {nc:6.2f} / {up:7.2f} / {pa:7.2f}")


if __name__ == "__main__":
    main()
