"""What-if simulation: run a replay plan through the broker-side session engine, in memory, on simulated time.

Sans-IO and deterministic: the plan's timeline (requests and responses in captured time order) drives one
FetchManager + FetchSessionCache per broker with the configuration under test, and one ClientModel per client
stream (FetchSessionHandler for session clients). The broker's reads come from the plan: the captured high
watermarks, log start offsets, errors and records sizes of each partition at each exchange. The engine decides
everything else: which sessions exist, which get evicted, which requests fail with 70/71, which partitions an
incremental response carries.

Byte counts are estimates: the captured frame sizes, corrected by the difference in partition entries between
the captured and the simulated exchange (the schema sizes of design §7.3) and in records bytes.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import random
import threading
from collections import Counter
from dataclasses import dataclass, field

from fetchtool.replay.clients import AS_CAPTURED, ClientModel
from fetchtool.replay.plan import REQUEST, ReplayPlan
from fetchtool.replay.tally import Tally
from fetchtool.sessions.cache import FetchSessionCache, SessionEvicted
from fetchtool.sessions.manager import FetchManager
from fetchtool.sessions.partitions import PartitionResult

_NO_DATA = PartitionResult()  # a partition the capture never showed: nothing read
_EMPTY: dict = {}

DEFAULT_SLOTS = 1000
DEFAULT_SHARDS = 8
DEFAULT_EVICTION_MS = 120_000


@dataclass(frozen=True, slots=True)
class SimConfig:
    cache_slots: int = DEFAULT_SLOTS
    cache_shards: int = DEFAULT_SHARDS
    eviction_ms: int = DEFAULT_EVICTION_MS

    def to_json(self) -> dict:
        return {"cache_slots": self.cache_slots, "cache_shards": self.cache_shards, "eviction_ms": self.eviction_ms}

    def __str__(self) -> str:
        return f"{self.cache_slots}/{self.cache_shards}/{self.eviction_ms / 1000:g}s"


@dataclass(slots=True)
class SimResult:
    config: SimConfig
    totals: Tally
    brokers: dict[str, Tally]
    streams: list[Tally]  # by stream index
    evicted_by: Counter = field(default_factory=Counter)  # stream index -> evictions it caused


class CapturedSessionIds(random.Random):
    """Session ids for the simulated brokers: the id the captured broker gave, when it fits.

    Kafka breaks ties between equally sized sessions by session id (the smallest is evicted first), so a
    simulation with random ids could pick a different victim than the real broker did. Before a full fetch that
    created a session in the capture, `hint` is set to the captured id; the cache's next id draw returns it if
    it lies in the drawing shard's range (and, if the id is taken, the cache draws again at random).
    """

    hint = 0

    def randrange(self, start, stop=None, step=1):
        hint = self.hint
        if hint and stop is not None and start <= hint < stop:
            self.hint = 0
            return hint
        return super().randrange(start, stop, step)


def request_entry_size(version: int) -> int:
    """Wire size of one partition entry of a Fetch request (design §7.3, from the schemas)."""
    return 16 if version <= 4 else 24 if version <= 8 else 28 if version <= 11 else 33


def response_entry_size(version: int) -> int:
    """Wire size of one partition entry without records of a Fetch response (design §7.3)."""
    return 18 if version <= 3 else 30 if version == 4 else 38 if version <= 10 else 42 if version == 11 else 37


def _reads(ctx, fetch, sent: int) -> dict:
    """What the broker read for the context's partitions: the captured log state at this exchange.

    The plan's reads cover exactly the client's wanted partitions. A full or sessionless request sends all of
    them, so the reads are the results as they are. An incremental context looks up each session partition in
    the results, so the (possibly larger) reads can be given whole; only the response's order differs from a
    read in session order, and no count the simulation reports depends on that order.
    """
    kind = ctx.kind
    reads = fetch.reads
    if kind == "error":
        return _EMPTY
    if kind == "incremental" or len(reads) == sent:
        return reads
    return {k: reads.get(k, _NO_DATA) for k, _ in ctx.partitions()}


def simulate(plan: ReplayPlan, config: SimConfig, sessions: str = AS_CAPTURED, seed: int = 0) -> SimResult:
    """Run the plan once with one cache configuration."""
    # The run allocates many short-lived, acyclic objects; with the cyclic collector on, every full collection
    # walks the whole plan (millions of objects) again. Nothing here relies on cycle collection.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _simulate(plan, config, sessions, seed)
    finally:
        if was_enabled:
            gc.enable()


def _simulate(plan: ReplayPlan, config: SimConfig, sessions: str, seed: int) -> SimResult:
    rng = CapturedSessionIds(seed)
    managers: dict[str, FetchManager] = {}
    caches: dict[str, FetchSessionCache] = {}
    for broker in plan.brokers:
        cache = FetchSessionCache(config.cache_slots, config.cache_shards, config.eviction_ms, rng=rng)
        caches[broker] = cache
        managers[broker] = FetchManager(cache)
    topic_names = {t.topic_id: name for name, t in plan.topics.items() if t.topic_id is not None}
    streams = plan.streams
    models = [ClientModel(s.behaviour, sessions, interned=plan.keys) for s in streams]
    tallies = [Tally() for _ in streams]
    owners: dict[tuple[str, int], int] = {}  # (broker, live session id) -> stream index
    evicted_by: Counter = Counter()
    pending: dict[tuple[int, int], tuple] = {}

    def answer(i: int, j: int, now_ms: int) -> None:
        ctx, sent, forgot = pending.pop((i, j))
        stream = streams[i]
        fetch = stream.fetches[j]
        tally = tallies[i]
        if fetch.throttle_time_ms and not fetch.response_partitions and ctx.kind != "error":
            outcome = ctx.throttled_response(fetch.throttle_time_ms)
        else:
            if ctx.kind == "full":
                rng.hint = fetch.response_session_id if fetch.epoch == 0 and not fetch.error_code else 0
            outcome = ctx.update_and_generate_response(now_ms, _reads(ctx, fetch, sent))
            rng.hint = 0
        tally.responses += 1
        err = outcome.error_code
        if err:
            tally.errors[err] += 1
        kind = ctx.kind
        if kind == "full" and outcome.session_id:
            tally.sessions_created += 1
            cache = caches[stream.broker]
            owners[(stream.broker, outcome.session_id)] = i
            for ev in cache.drain_events():
                if isinstance(ev, SessionEvicted):
                    victim = owners.pop((stream.broker, ev.session_id), None)
                    if victim is not None:
                        tallies[victim].evictions += 1
                    evicted_by[i] += 1
        elif kind == "incremental" and not err:
            tally.incremental += 1
        parts = outcome.partitions
        records = 0
        for _k, r in parts:
            records += r.records_size
        tally.records_bytes += records
        v = fetch.version
        tally.request_bytes += max(0, (fetch.request_bytes or 0) + (sent - fetch.sent) * request_entry_size(v)
                                   + (forgot - fetch.forgotten) * 4)
        if fetch.response_bytes is not None:
            tally.response_bytes += max(0, fetch.response_bytes
                                        + (len(parts) - (fetch.response_partitions or 0)) * response_entry_size(v)
                                        + records - (fetch.records_bytes or 0))
        models[i].response(v, err, outcome.session_id, outcome.throttle_time_ms, parts)

    for t_ms, phase, i, j in plan.timeline:
        if phase == REQUEST:
            stream = streams[i]
            fetch = stream.fetches[j]
            req = models[i].request(fetch)
            tallies[i].requests += 1
            ctx = managers[stream.broker].new_context(
                t_ms, fetch.version, req.metadata, stream.is_follower, req.fetch_data, req.to_forget, topic_names,
            )
            pending[(i, j)] = (ctx, len(req.fetch_data), len(req.to_forget))
            if fetch.response_t_ms is None:
                answer(i, j, t_ms)
        else:
            answer(i, j, t_ms)

    totals = Tally()
    brokers: dict[str, Tally] = {}
    for stream, tally in zip(streams, tallies):
        brokers.setdefault(stream.broker, Tally()).add(tally)
        totals.add(tally)
    return SimResult(config, totals, brokers, tallies, evicted_by)


# The plan a forked worker simulates: set in the parent just before the fork, so workers inherit it instead of
# unpickling millions of objects.
_FORKED_PLAN: tuple[ReplayPlan, str, int] | None = None


def _simulate_forked(config: SimConfig) -> SimResult:
    plan, sessions, seed = _FORKED_PLAN  # type: ignore[misc]
    return simulate(plan, config, sessions, seed)


def simulate_many(plan: ReplayPlan, configs: list[SimConfig], sessions: str = AS_CAPTURED,
                  seed: int = 0, processes: int | None = None) -> list[SimResult]:
    """Run the plan once per configuration; results in ``configs`` order.

    Each run is independent and deterministic, so with more than one configuration they run in forked worker
    processes, one per core (``processes``: at most this many; 1 runs them here, in order). Falls back to
    running them here where fork is unavailable or other threads are running (forking those is unsafe).
    """
    global _FORKED_PLAN
    workers = min(len(configs), processes or os.cpu_count() or 1)
    if workers < 2 or "fork" not in multiprocessing.get_all_start_methods() or threading.active_count() > 1:
        return [simulate(plan, c, sessions, seed) for c in configs]
    _FORKED_PLAN = (plan, sessions, seed)
    try:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            return pool.map(_simulate_forked, configs, chunksize=1)
    finally:
        _FORKED_PLAN = None
