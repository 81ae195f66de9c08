"""What-if simulation: run a replay plan through the broker-side session engine, in memory, on simulated time.

Sans-IO and deterministic: the plan's timeline (requests and responses in captured time order) drives one
FetchManager + FetchSessionCache per broker with the configuration under test, and one ClientModel per client
and broker, kept across the client's reconnections as Kafka's consumer keeps its FetchSessionHandler
(FetchSessionHandler for session clients). The broker's reads come from the plan: the captured high
watermarks, log start offsets, errors and records sizes of each partition at each exchange. The engine decides
everything else: which sessions exist, which get evicted, which requests fail with 70/71, which partitions an
incremental response carries.

Byte counts are estimates: the captured frame sizes, corrected by the difference in partition entries between
the captured and the simulated exchange (the per-entry sizes analysis.savings_size measures from the codec)
and in records bytes.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import random
import threading
from array import array
from collections import Counter, deque
from dataclasses import dataclass
from typing import Callable, cast

from fetchtool.analysis.savings.sizes import VersionSizes, version_sizes
from fetchtool.replay.clients import AS_CAPTURED, ClientModel, answer_reached_client
from fetchtool.replay.plan import REQUEST, RESPONSE, ReplayPlan
from fetchtool.replay.tally import StreamCounts, StreamTallies, Tally, totals_by_broker
from fetchtool.sessions.cache import (DEFAULT_EVICTION_MS, DEFAULT_MAX_SLOTS, DEFAULT_SHARDS, FetchSessionCache,
                                      SessionEvicted)
from fetchtool.sessions.manager import FetchContext, FetchManager
from fetchtool.sessions.partitions import PartitionResult

_NO_DATA = PartitionResult()  # a partition the capture never showed: nothing read
_EMPTY: dict = {}



@dataclass(frozen=True, slots=True)
class SimConfig:
    cache_slots: int = DEFAULT_MAX_SLOTS
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
    streams: StreamTallies  # by stream index
    evicted_by: StreamCounts  # stream index -> evictions it caused (the streams that caused any are its keys)


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


def simulate(plan: ReplayPlan, config: SimConfig, sessions: str = AS_CAPTURED, seed: int = 0,
             processes: int | None = 1) -> SimResult:
    """Run the plan once with one cache configuration.

    Brokers share nothing (each has its own cache, round-robin counter and session-id draws), so with
    ``processes`` > 1 (None: one per core) the brokers are simulated in forked workers and their results merged;
    the result is the same as in one process.
    """
    return simulate_many(plan, [config], sessions, seed, processes)[0]


def _without_gc(run, *args):
    # The run allocates many short-lived, acyclic objects; with the cyclic collector on, every full collection
    # walks the whole plan (millions of objects) again. Nothing here relies on cycle collection.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return run(*args)
    finally:
        if was_enabled:
            gc.enable()


class _Sizes(dict):
    """version -> analysis.savings_size.VersionSizes, measured on first use (the loop indexes it per exchange)."""

    def __missing__(self, version: int) -> VersionSizes:
        self[version] = sizes = version_sizes(version)
        return sizes


def _simulate(plan: ReplayPlan, config: SimConfig, sessions: str, seed: int,
              brokers: frozenset[str] | None = None) -> _Part:
    """Simulate the streams of ``brokers`` (None: all); the other streams are left out (their tallies zero)."""
    # One session-id source per broker, each seeded alike: a broker's draws do not depend on the other brokers'
    # traffic, which is what lets brokers be simulated apart and merged.
    managers: dict[str, FetchManager] = {}
    caches: dict[str, FetchSessionCache] = {}
    rngs: dict[str, CapturedSessionIds] = {}
    for broker in plan.brokers:
        if brokers is not None and broker not in brokers:
            continue
        rng = rngs[broker] = CapturedSessionIds(seed)
        cache = FetchSessionCache(config.cache_slots, config.cache_shards, config.eviction_ms, rng=rng)
        caches[broker] = cache
        managers[broker] = FetchManager(cache)
    topic_names = {t.topic_id: name for name, t in plan.topics.items() if t.topic_id is not None}
    streams = plan.streams
    mine = [s.broker in managers for s in streams]
    # One model (one FetchSessionHandler) per client and broker: a stream that carries on an earlier connection
    # of the same client (plan.link_reconnects) goes on with that connection's model. A model is made at its
    # client's first event and let go after its last: a storm of 100,000 connections holds the models of the
    # connections open at once, not of all of them.
    # (Stream and event indices as int32, 4 bytes a stream: 2**31 events would not fit in memory as a plan.)
    root = array("i", (_first_connection(streams, s.index) for s in streams))
    timeline = plan.timeline
    stream_last = array("i", bytes(4 * len(streams)))    # per stream: its last timeline event
    for n, packed in enumerate(timeline.packed):
        stream_last[packed >> 32] = n
    chain_last = array("i", bytes(4 * len(streams)))     # per first connection: its client's last event
    for i, n in enumerate(stream_last):
        if n > chain_last[root[i]]:
            chain_last[root[i]] = n
    ends = array("i", sorted(n + 1 for n in stream_last))   # events (counted from 1) that end a stream
    ends.append(-1)
    models: list[ClientModel | None] = [None] * len(streams)   # per stream, from its first event to its last
    chain_models: dict[int, ClientModel] = {}   # first connection's stream index -> the client's model
    keys = plan.keys
    # Per stream: its Tally from its first event to its last (then packed into ``ended``, as its model goes), None
    # before and after, and for a stream out of scope.
    tallies: list[Tally | None] = [None] * len(streams)
    ended = StreamTallies(len(streams))
    owners: dict[tuple[str, int], int] = {}  # (broker, live session id) -> stream index
    evicted_by = StreamCounts(len(streams))
    pending: dict[int, tuple] = {}   # (i << 31 | j) -> the context of fetch j of stream i, awaiting its response
    # Per stream, what the loop needs of it, looked up once (one bound method per broker, shared).
    fetches = [s.fetches for s in streams]
    broker_context = {broker: manager.new_context for broker, manager in managers.items()}
    new_context = cast(list[Callable[..., FetchContext]], [broker_context.get(s.broker) for s in streams])
    reconnected = {s.index for s in streams if s.follows is not None}
    lost = [0] * len(streams)   # per stream: answers the client never got
    sizes = _Sizes()
    every = all(mine)
    # A plan that makes its reads as they are needed (built with_reads=LATER) gives each step's at its response.
    later = plan.later_reads
    take = None if later is None else later.reader(streams, None if every else mine)

    # Kafka reads a connection's next request only once it has answered the one before (the channel is muted
    # meanwhile), so a request the client sent during a long poll (a consumer's close, a second fetch of one
    # session) is built by the client when the capture shows it, but handled by the broker after that answer.
    busy = [-1] * len(streams)   # per stream: captured time of the answer the broker is working on, or -1
    waiting: dict[int, deque] = {}   # per stream with any: (j, request parts) sent, not yet read
    deferred: list[tuple[int, int, int, int]] = []

    # The plan's timeline, each deferred event right after the one that deferred it.
    next_event = zip(timeline.t_ms, timeline.packed).__next__
    events = len(timeline)
    at = 0
    end = 0                 # the next stream end in ``ends``
    done = -1               # a stream whose last event was handled: its model goes once the events it deferred are
    model: ClientModel | None
    while True:
        if deferred:
            t_ms, phase, i, j = deferred.pop()
            model = models[i]
        elif at < events:
            if done >= 0:
                models[done] = None
                _pack(ended, done, tallies, fetches, lost)
                first = root[done]
                if chain_last[first] == stream_last[done]:
                    chain_models.pop(first, None)   # (none for a stream of a broker left out)
                done = -1
            t_ms, packed = next_event()
            phase = packed & 1
            i = packed >> 32
            j = (packed >> 1) & 0x7FFFFFFF
            at += 1
            if at == ends[end]:
                end += 1
                done = i
            if not every and not mine[i]:
                continue
            model = models[i]
            if model is None:
                first = root[i]
                model = chain_models.get(first)
                if model is None:
                    model = chain_models[first] = ClientModel(streams[first].behaviour, sessions, interned=keys)
                models[i] = model
                tallies[i] = Tally()
        else:
            break
        assert model is not None    # (made at the stream's first event, which comes before any it defers)
        if phase == RESPONSE:
            ctx, sent, forgot = pending.pop(i << 31 | j)
            fetch = fetches[i][j]
            delivered = True
            busy[i] = -1
            if i in waiting:
                deferred.append((t_ms, _READ, i, 0))
        else:
            if phase == REQUEST:
                fetch = fetches[i][j]
                if j == 0 and i in reconnected and not fetch.incremental:
                    # The client's previous connection was lost under its fetch in flight: Kafka's client failed
                    # that fetch (handleError), so it opens this one with (id, 0), or (0, 0) if it held none.
                    model.error()
                parts = model.request_parts(fetch)
                if busy[i] >= 0 and (fetch.response_t_ms is None or fetch.response_t_ms >= busy[i]):
                    queue = waiting.get(i)
                    if queue is None:
                        queue = waiting[i] = deque()
                    queue.append((j, parts))
                    continue
            else:   # _READ: the broker reads a request that waited for the answer before it
                queue = waiting[i]
                j, parts = queue.popleft()
                if not queue:
                    del waiting[i]
                fetch = fetches[i][j]
            metadata, fetch_data, to_forget = parts
            ctx = new_context[i](t_ms, fetch.version, metadata, streams[i].is_follower, fetch_data, to_forget,
                                 topic_names)
            if fetch.response_t_ms is not None:
                pending[i << 31 | j] = (ctx, len(fetch_data), len(to_forget))
                busy[i] = fetch.response_t_ms
                continue
            sent, forgot = len(fetch_data), len(to_forget)
            # No captured response: the broker still handles the request now (it reached the broker), but the
            # answer may never have reached the client.
            delivered = answer_reached_client(fetches[i], j)
            if i in waiting:
                deferred.append((t_ms, _READ, i, 0))
        # The response: the context answers from the plan's reads, the captured log state at this exchange.
        # They cover exactly the client's wanted partitions: a full or sessionless request sent them all, so they
        # are given as they are; an incremental context looks each session partition up in them, so the
        # (possibly larger) reads can be given whole. Only the response order can differ from a read in session
        # order, and no count the simulation reports depends on it.
        tally = cast(Tally, tallies[i])   # (made at the stream's first event)
        kind = ctx.kind
        throttle = fetch.throttle_time_ms
        reads = fetch.reads if take is None else take(i, j)
        if throttle and not fetch.response_partitions:
            # The captured broker throttled this fetch: Kafka then answers getThrottledResponse, empty, with no
            # session created; a session error context answers (NONE, session 0) too (KafkaApis, Kafka 4.3.1).
            outcome = ctx.throttled_response(throttle)
        elif kind == "incremental":
            outcome = ctx.update_and_generate_response(t_ms, reads)
        elif kind == "error":
            outcome = ctx.update_and_generate_response(t_ms, _EMPTY)
        else:
            if len(reads) != sent:
                reads = {k: reads.get(k, _NO_DATA) for k, _ in ctx.partitions()}
            if kind == "full":
                rng = rngs[streams[i].broker]
                rng.hint = (fetch.response_session_id or 0) if fetch.epoch == 0 and not fetch.error_code else 0
                outcome = ctx.update_and_generate_response(t_ms, reads)
                rng.hint = 0
            else:
                outcome = ctx.update_and_generate_response(t_ms, reads)
        err, session_id, throttled, parts = outcome
        if kind == "full" and session_id:
            tally.sessions_created += 1
            broker = streams[i].broker
            owners[(broker, session_id)] = i
            for ev in caches[broker].drain_events():
                if isinstance(ev, SessionEvicted):
                    victim = owners.pop((broker, ev.session_id), None)
                    if victim is not None:   # a session of a stream this scope simulates
                        owner = tallies[victim]
                        if owner is not None:
                            owner.evictions += 1
                        else:   # (the stream has ended, its session lived on)
                            ended.add_to(victim, "evictions", 1)
                    evicted_by.add(i)
        v = fetch.version
        vs = sizes[v]
        request_bytes = ((fetch.request_bytes or 0) + (sent - fetch.sent) * vs.req_partition
                         + (forgot - fetch.forgotten) * vs.forgot_partition)
        if request_bytes > 0:
            tally.request_bytes += request_bytes
        if not delivered:
            # The broker's session state moved on, the client saw a failure: counted as a request only.
            lost[i] += 1
            model.error()
            continue
        if err:
            tally.errors[err] += 1
        elif kind == "incremental":
            tally.incremental += 1
        records = 0
        for _k, r in parts:
            records += r.records_size
        tally.records_bytes += records
        response_bytes = fetch.response_bytes
        if response_bytes is not None:
            response_bytes += ((len(parts) - (fetch.response_partitions or 0)) * vs.resp_partition
                               + records - (fetch.records_bytes or 0))
            if response_bytes > 0:
                tally.response_bytes += response_bytes
        model.response(v, err, session_id, throttled, parts)

    for i, left in enumerate(tallies):   # the streams whose end the loop did not reach
        if left is not None:
            _pack(ended, i, tallies, fetches, lost)
    return ended, evicted_by


def _pack(ended: StreamTallies, i: int, tallies: list[Tally | None], fetches: list, lost: list[int]) -> None:
    """Stream ``i`` has ended: every planned fetch was requested once, and answered (at its captured response
    time, or at once when the capture has no response) unless the client never got the answer; its tally goes
    into ``ended``."""
    tally = tallies[i]
    if tally is not None:   # (None: a stream of a broker left out)
        tally.requests = len(fetches[i])
        tally.responses = len(fetches[i]) - lost[i]
        ended.put(i, tally)
        tallies[i] = None


_READ = -1   # a timeline phase of simulate's own: the broker reads a request that waited (see _simulate)


def _first_connection(streams, i: int) -> int:
    """The stream of the first connection of stream ``i``'s client to its broker (plan.link_reconnects)."""
    while streams[i].follows is not None:
        i = streams[i].follows
    return i


_Part = tuple  # (StreamTallies, zero for the streams left out; StreamCounts of the evictions caused)


def _merge(plan: ReplayPlan, config: SimConfig, parts: list[_Part]) -> SimResult:
    """One result from runs over disjoint sets of brokers (each stream's tally comes from the run that had it)."""
    tallies, evicted_by = parts[0]
    for part_tallies, part_evicted in parts[1:]:
        tallies.merge(part_tallies)     # (each stream is counted in one part only, zero in the others)
        evicted_by.merge(part_evicted)
    return SimResult(config, *totals_by_broker(plan, tallies), tallies, evicted_by)


# The plan a forked worker simulates: set in the parent just before the fork, so workers inherit it instead of
# unpickling millions of objects.
_FORKED_PLAN: tuple[ReplayPlan, str, int] | None = None
_FORK_FROM = 20_000   # simulated exchanges in all below which simulate_many(processes=None) stays in this process


def _simulate_forked(task: tuple[int, SimConfig, frozenset[str] | None]) -> tuple[int, _Part]:
    plan, sessions, seed = _FORKED_PLAN  # type: ignore[misc]
    index, config, brokers = task
    return index, _without_gc(_simulate, plan, config, sessions, seed, brokers)


def simulate_many(plan: ReplayPlan, configs: list[SimConfig], sessions: str = AS_CAPTURED,
                  seed: int = 0, processes: int | None = None) -> list[SimResult]:
    """Run the plan once per configuration; results in ``configs`` order.

    Every (configuration, broker) pair is an independent, deterministic run, so with more than one of them they
    run in forked worker processes, one per core (``processes``: at most this many; 1 runs everything here),
    biggest first, and each configuration's brokers are merged into one result. Falls back to running here
    where fork is unavailable or other threads are running (forking those is unsafe), and, unless ``processes``
    is given, for small plans.
    """
    global _FORKED_PLAN
    brokers = plan.brokers
    tasks = [(c, config, frozenset([b])) for c, config in enumerate(configs) for b in brokers] if len(brokers) > 1 \
        else [(c, config, None) for c, config in enumerate(configs)]
    workers = min(len(tasks), processes or os.cpu_count() or 1)
    if processes is None and plan.requests * len(configs) < _FORK_FROM:
        workers = 1     # a small plan is done before a pool would have started
    if workers < 2 or "fork" not in multiprocessing.get_all_start_methods() or threading.active_count() > 1:
        return [_merge(plan, config, [_without_gc(_simulate, plan, config, sessions, seed)]) for config in configs]
    # Longest first (by exchanges), so that no worker is left with a big broker at the end.
    load: Counter[str] = Counter()
    for s in plan.streams:
        load[s.broker] += len(s.fetches)
    tasks.sort(key=lambda t: -sum(load[b] for b in (t[2] or brokers)))
    _FORKED_PLAN = (plan, sessions, seed)
    parts: list[list[_Part]] = [[] for _ in configs]
    try:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            for index, part in pool.imap_unordered(_simulate_forked, tasks, chunksize=1):
                parts[index].append(part)
    finally:
        _FORKED_PLAN = None
    return [_merge(plan, config, p) for config, p in zip(configs, parts)]
