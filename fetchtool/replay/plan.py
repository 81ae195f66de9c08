"""The replay plan: each client's fetch workload over time, built from decoded exchanges.

Sans-IO: Exchange items in, a `ReplayPlan` out (the caller may give a temporary file for the partitions the
first pass spills; see build_plan). A plan holds one `ClientStream` per (client connection, broker),
each a list of `PlannedFetch` in request order. A planned fetch says what the client *wanted* at that moment
(its whole partition set with offsets and byte limits, reconstructed from the full and incremental requests it
sent), the request's top-level fields and timing, what the capture shows the broker answered, and what a read
of each wanted partition gave (the "log" the simulation answers from: the captured high watermarks, log start
offsets, errors and records sizes).

The session behaviour of each stream is classified from the capture (`SESSION`, `ALWAYS_NEW`, `SESSIONLESS`),
so that simulate and replay drive the client as it behaved: a client that ignored the session id the broker gave
it (the old Sarama bug) keeps sending (0, 0); a sessionless client stays sessionless. A stream that is the same
client's next connection to the same broker, carrying its session on, names the stream it follows.
"""

from __future__ import annotations

import functools
import io
import marshal
import operator
import os
import uuid
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Callable, cast

from fetchtool.exchange import FETCH, Exchange, ForgottenPartition, RequestPartition, ResponsePartition
from fetchtool.printable import one_line
from fetchtool.protocol.connection import OrphanResponse
from fetchtool.sessions.partitions import (ZERO_UUID, PartitionData, PartitionResult, ReadResults, TopicIdPartition,
                                           TopicPartition)

_set = object.__setattr__

# How a client used fetch sessions in the capture.
SESSION = "session"  # sends (0,0) then follows the broker's session id and epochs: driven by FetchSessionHandler
ALWAYS_NEW = "always_new"  # sends (0,0) on every fetch although the broker gave it a session (Sarama #1644)
SESSIONLESS = "sessionless"  # (0,-1) or Fetch < v7: never asks for a session

# Timeline phases: at equal times a response is handled before the next request (one in flight per client).
RESPONSE = 0
REQUEST = 1

# build_plan(with_reads=LATER): the steps' reads are made while simulating, from the spill (ReplayPlan.later_reads)
LATER = "later"
# build_plan(with_reads=LATER_IF_MANY): held while the steps' reads hold at most HELD_READS_LIMIT entries (one per
# wanted partition and step, and STEP_ENTRIES per step), else LATER. Held reads take about 110 bytes per entry
# (bench1g: 2.27 million entries, 250 MB) and are made once for every configuration simulated; made later they take
# none, but each configuration simulated makes them again. The limit (about 55 MB) is also what a bigger capture's
# plan holds before it switches.
LATER_IF_MANY = "later-if-many"
HELD_READS_LIMIT = 500_000
# A step's own reads (their ReadResults mapping and its changed tuple, about 400 bytes) weigh as much as this many
# entries: a storm of 100,000 connections fetching 3 partitions each held 150,000 of them, 450,000 entries, under
# the limit counted by partitions alone, and its plan took 460 MB.
STEP_ENTRIES = 4


@dataclass(frozen=True, slots=True)
class WantedPartition:
    """One partition a client wanted: its client key, its broker key and the request's per-partition data."""

    tp: TopicPartition
    key: TopicIdPartition
    data: PartitionData


@dataclass(frozen=True, slots=True)
class PlannedFetch:
    """One captured Fetch exchange, seen as a step of the client's workload."""

    t_ms: int  # request time, ms since the plan's start
    response_t_ms: int | None  # None when the response was not captured
    version: int
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int
    session_id: int  # as captured
    epoch: int  # as captured
    wanted: tuple[WantedPartition, ...]  # the client's whole partition set at this step
    sent: int  # partitions the captured request carried
    forgotten: int
    # the captured answer
    error_code: int | None
    response_session_id: int | None
    throttle_time_ms: int | None
    response_partitions: int | None
    records_bytes: int | None
    request_bytes: int | None
    response_bytes: int | None
    # what the broker's log gave for each wanted partition at this moment (the simulation's reads)
    reads: dict[TopicIdPartition, PartitionResult]
    correlation_id: int = -1
    request_frame: int | None = None

    def __init__(self, t_ms, response_t_ms, version, replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level,
                 session_id, epoch, wanted, sent, forgotten, error_code, response_session_id, throttle_time_ms,
                 response_partitions, records_bytes, request_bytes, response_bytes, reads, correlation_id=-1,
                 request_frame=None) -> None:
        # A plan holds one per captured exchange: assigned with a pre-bound setter rather than the generated
        # frozen __init__'s per-field lookup (same fields, same order, still frozen).
        _set(self, "t_ms", t_ms)
        _set(self, "response_t_ms", response_t_ms)
        _set(self, "version", version)
        _set(self, "replica_id", replica_id)
        _set(self, "max_wait_ms", max_wait_ms)
        _set(self, "min_bytes", min_bytes)
        _set(self, "max_bytes", max_bytes)
        _set(self, "isolation_level", isolation_level)
        _set(self, "session_id", session_id)
        _set(self, "epoch", epoch)
        _set(self, "wanted", wanted)
        _set(self, "sent", sent)
        _set(self, "forgotten", forgotten)
        _set(self, "error_code", error_code)
        _set(self, "response_session_id", response_session_id)
        _set(self, "throttle_time_ms", throttle_time_ms)
        _set(self, "response_partitions", response_partitions)
        _set(self, "records_bytes", records_bytes)
        _set(self, "request_bytes", request_bytes)
        _set(self, "response_bytes", response_bytes)
        _set(self, "reads", reads)
        _set(self, "correlation_id", correlation_id)
        _set(self, "request_frame", request_frame)

    @property
    def incremental(self) -> bool:
        return self.epoch > 0 or self.epoch < -1


@dataclass(slots=True)
class ClientStream:
    """One client connection's fetches to one broker."""

    index: int
    client: str
    broker: str
    client_id: str | None
    behaviour: str
    is_follower: bool
    fetches: list[PlannedFetch] = field(default_factory=list)
    # The stream of the same client's previous connection to this broker, when this one carries its fetch session
    # on (Kafka's consumer keeps one FetchSessionHandler per broker node across reconnects): see link_reconnects.
    follows: int | None = None

    @property
    def label(self) -> str:
        return f"{self.client} ({one_line(self.client_id)})" if self.client_id else self.client

    @property
    def host(self) -> str:
        return self.client.rsplit(":", 1)[0]

    def identity(self) -> dict:
        """The fields that name the stream in a JSON report."""
        return {"client": self.client, "client_id": self.client_id, "broker": self.broker,
                "behaviour": self.behaviour}


class Timeline:
    """The plan's events in time order, each read as (t_ms, phase, stream index, step index): two int arrays,
    16 bytes an event (a list of tuples took 88; a storm's 300,000 events, 26 MB)."""

    __slots__ = ("t_ms", "packed")

    def __init__(self, events: Iterable[tuple[int, int, int, int]] = ()) -> None:
        self.t_ms = array("q")
        self.packed = array("q")    # stream << 32 | step << 1 | phase
        for t_ms, phase, i, j in events:
            self.append(t_ms, phase, i, j)

    def append(self, t_ms: int, phase: int, i: int, j: int) -> None:
        self.t_ms.append(t_ms)
        self.packed.append(i << 32 | j << 1 | phase)

    def __len__(self) -> int:
        return len(self.t_ms)

    def __getitem__(self, n: int) -> tuple[int, int, int, int]:
        p = self.packed[n]
        return self.t_ms[n], p & 1, p >> 32, (p >> 1) & 0x7FFFFFFF

    def __iter__(self) -> Iterator[tuple[int, int, int, int]]:
        for t_ms, p in zip(self.t_ms, self.packed):
            yield t_ms, p & 1, p >> 32, (p >> 1) & 0x7FFFFFFF

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Timeline):
            return self.t_ms == other.t_ms and self.packed == other.packed
        return isinstance(other, list) and list(self) == other

    def __repr__(self) -> str:
        return f"Timeline({list(self)!r})"


@dataclass(slots=True)
class TopicInfo:
    """What the capture tells about a topic: enough to seed a broker that a replay can run against."""

    name: str
    topic_id: uuid.UUID | None
    partitions: set[int] = field(default_factory=set)
    records_bytes: int = 0  # records bytes the capture's responses carried for the topic

    @property
    def partition_count(self) -> int:
        return max(self.partitions) + 1 if self.partitions else 1


@dataclass(slots=True)
class ReplayPlan:
    start_ts: float
    duration_ms: int
    streams: list[ClientStream]
    topics: dict[str, TopicInfo]
    # (t_ms, phase, stream index, fetch index) in time order; phase RESPONSE before REQUEST at equal times
    timeline: Timeline
    skipped: Counter  # exchanges left out of the plan, by reason
    # (topic, partition, topic id) -> the plan's one (TopicPartition, TopicIdPartition) pair for it
    keys: dict[tuple, tuple[TopicPartition, TopicIdPartition]] = field(default_factory=dict)
    # A plan built with_reads=LATER: what makes every step's reads again, step by step (its fetches' reads are empty)
    later_reads: LaterReads | None = None

    @property
    def requests(self) -> int:
        return sum(len(s.fetches) for s in self.streams)

    def connections_at_once(self) -> int:
        """The most client connections the capture has open at one point of its timeline: a stream is open from
        its first request to its last captured event (what an as-fast replay, which keeps that order, holds)."""
        first: dict[int, int] = {}
        last: dict[int, int] = {}
        for n, (_t, _phase, i, _j) in enumerate(self.timeline):
            first.setdefault(i, n)
            last[i] = n
        closing = Counter(last.values())
        now = peak = 0
        for n, (_t, _phase, i, _j) in enumerate(self.timeline):
            if first[i] == n:
                now += 1
                peak = max(peak, now)
            now -= closing.get(n, 0)
        return peak

    @property
    def brokers(self) -> list[str]:
        return sorted({s.broker for s in self.streams})

    @property
    def clients(self) -> list[str]:
        return sorted({s.client for s in self.streams})

    def summary(self) -> dict:
        """What --dry-run prints: clients, requests, expected duration. Its per-stream list is made row by row as
        it is read (jsonout.Rows): a storm's 100,000 rows as dicts took 100 MB."""
        from fetchtool.replay.jsonout import Rows

        streams = self.streams

        def stream_row(n: int) -> dict:
            s = streams[n]
            return {
                **s.identity(),
                "follower": s.is_follower,
                "requests": len(s.fetches),
                "partitions": len(s.fetches[-1].wanted) if s.fetches else 0,
                "first_ms": s.fetches[0].t_ms if s.fetches else None,
                "last_ms": s.fetches[-1].t_ms if s.fetches else None,
            }

        return {
            "clients": len(self.clients),
            "streams": len(self.streams),
            "brokers": self.brokers,
            "requests": self.requests,
            "duration_s": round(self.duration_ms / 1000.0, 3),
            "topics": {name: t.partition_count for name, t in sorted(self.topics.items())},
            "behaviours": dict(Counter(s.behaviour for s in self.streams)),
            "skipped": dict(self.skipped),
            "per_stream": Rows(len(streams), stream_row),
        }


@functools.lru_cache(maxsize=4096)   # a capture names few topics, on every request
def _uuid(text: str | None) -> uuid.UUID:
    if not text:
        return ZERO_UUID
    try:
        return uuid.UUID(text)
    except ValueError:
        return ZERO_UUID


class _Log:
    """The broker-wide latest knowledge of one partition, from every captured response."""

    __slots__ = ("hw", "lso", "stable", "result")

    def __init__(self) -> None:
        self.hw = -1
        self.lso = -1
        self.stable = -1
        # What a read of the partition gives when the response did not carry it (made when first needed); one
        # object while the log is unchanged, shared by every stream that reads it (the engine skips a result
        # object it has seen).
        self.result: PartitionResult | None = _NOTHING_READ

    def update(self, hw: int, lso: int, stable: int) -> None:
        if hw != self.hw or lso != self.lso or stable != self.stable:
            self.hw, self.lso, self.stable = hw, lso, hw if stable == hw else stable
            self.result = None

    def read(self) -> PartitionResult:
        result = self.result
        if result is None:
            result = self.result = PartitionResult(0, self.hw, self.stable, self.lso, 0)
        return result


_NOTHING_READ = PartitionResult(0, -1, -1, -1, 0)  # a partition no captured response has shown yet
_NO_READS = ReadResults()  # every step's reads in a plan built without them
_APPLIED: dict = {}  # build_plan: the wanted set of a stream whose every request is applied


def classify(exchanges: list[Any]) -> str:
    """How a connection used sessions, from its requests and the broker's answers (Exchange items, or what the
    plan's first pass keeps of them)."""
    if all(e.api_version < 7 or e.session_epoch == -1 and not e.session_id for e in exchanges):
        return SESSIONLESS
    if any((e.session_epoch or 0) > 0 for e in exchanges):
        return SESSION
    granted = [e for e in exchanges if e.response_session_id]
    # Granted a session but kept sending (0,0): the client ignores session ids.
    if granted and all((e.session_id or 0) == 0 and e.session_epoch == 0 for e in exchanges if e.api_version >= 7):
        return ALWAYS_NEW
    if all(e.session_epoch == -1 for e in exchanges if e.api_version >= 7):
        return SESSIONLESS
    return SESSION  # (0,0) never granted (cache full) looks the same from a handler-driven client


class _Seen:
    """What the first pass keeps of a Fetch exchange: its stream, its place in time, the request's and response's
    top-level fields (classify() and the timeline read them too). Its partitions wait in the spill."""

    __slots__ = ("client", "broker", "conn", "ts", "response_ts", "correlation_id", "request_frame", "api_version",
                 "session_id", "session_epoch", "response_session_id", "client_id", "replica_id", "max_wait_ms",
                 "min_bytes", "max_bytes", "isolation_level", "error_code", "throttle_time_ms", "request_bytes",
                 "response_bytes", "sent", "forgotten", "response_partitions", "offset", "size")

    def __init__(self, ex: Exchange, offset: int, size: int) -> None:
        self.client = ex.client
        self.broker = ex.broker
        self.conn = ex.conn
        self.ts = ex.ts
        self.response_ts = ex.response_ts
        self.correlation_id = ex.correlation_id
        self.request_frame = ex.request_frame
        self.api_version = ex.api_version
        self.session_id = ex.session_id
        self.session_epoch = ex.session_epoch
        self.response_session_id = ex.response_session_id
        self.client_id = ex.client_id
        self.replica_id = ex.replica_id
        self.max_wait_ms = ex.max_wait_ms
        self.min_bytes = ex.min_bytes
        self.max_bytes = ex.max_bytes
        self.isolation_level = ex.isolation_level
        self.error_code = ex.error_code
        self.throttle_time_ms = ex.throttle_time_ms
        self.request_bytes = ex.request_bytes
        self.response_bytes = ex.response_bytes
        self.sent = len(ex.request_partitions)
        self.forgotten = len(ex.forgotten_partitions)
        rps = ex.response_partitions
        self.response_partitions = None if rps is None else len(rps)
        self.offset = offset    # where the spill holds its partitions
        self.size = size


# The spill holds each exchange's partitions as plain tuples of the fields the second pass reads, in this order.
_REQUEST_FIELDS = ("topic", "topic_id", "partition", "fetch_offset", "partition_max_bytes", "log_start_offset",
                   "current_leader_epoch", "last_fetched_epoch")
_RESPONSE_FIELDS = ("topic", "topic_id", "partition", "error_code", "high_watermark", "last_stable_offset",
                    "log_start_offset", "preferred_read_replica", "diverging_epoch", "records_bytes")
_request_fields = operator.itemgetter(*(RequestPartition._fields.index(f) for f in _REQUEST_FIELDS))
_response_fields = operator.itemgetter(*(ResponsePartition._fields.index(f) for f in _RESPONSE_FIELDS))
assert ForgottenPartition._fields == _REQUEST_FIELDS[:3] == _RESPONSE_FIELDS[:3]
_TOPIC, _TOPIC_ID, _PARTITION, _FETCH_OFFSET, _PARTITION_MAX_BYTES, _LOG_START, _LEADER_EPOCH, \
    _LAST_FETCHED_EPOCH = range(len(_REQUEST_FIELDS))
_ERROR, _HW, _LSO, _R_LOG_START, _PREFERRED, _DIVERGING, _RECORDS_BYTES = range(3, len(_RESPONSE_FIELDS))


def _spilled(ex: Exchange) -> tuple:
    rps = ex.response_partitions
    return (tuple(map(_request_fields, ex.request_partitions)), tuple(map(tuple, ex.forgotten_partitions)),
            None if rps is None else tuple(map(_response_fields, rps)))


def build_plan(exchanges: Iterable[Exchange | OrphanResponse], spill: BinaryIO | None = None,
               with_reads: bool | str = True) -> ReplayPlan:
    """The replay plan of a capture's Fetch exchanges (FetchSnapshot and other traffic are counted, not planned).

    Two passes, so that the capture's exchanges are never all held: the first keeps of each exchange its place
    (stream, times) and top-level fields, and writes its partitions to ``spill`` (a temporary file the caller
    gives; memory by default); the second reads each exchange's back when its turn comes in response order and
    works out the step's wanted set and reads.

    ``with_reads=False`` leaves every step's reads empty: the plan's shape (streams, wanted sets, topics, timeline)
    without the log state a simulation or replay answers from, most of a plan's memory (replay --dry-run).
    ``with_reads=LATER`` leaves them empty too, and the plan keeps ``spill`` (which must then stay open while the
    plan is used) to make them again, in the same order, when a simulation asks for them (``later_reads``): the
    plan's memory then no longer grows with the capture's partition rows. ``LATER_IF_MANY``: as True while the
    reads hold at most HELD_READS_LIMIT entries, then as LATER, the reads made so far dropped (simulate)."""
    skipped: Counter = Counter()
    by_stream: dict[tuple[str, str, int], list[_Seen]] = {}
    spill = spill if spill is not None else io.BytesIO()
    spill.seek(0)
    spill.truncate()
    # Each exchange's partitions as one marshal record, found again by its offset and length (marshal.load on a
    # file reads in tiny pieces: 0.98 s of bench100's 2.9; loads on the record's bytes is 30x faster).
    write = spill.write
    dumps = marshal.dumps
    offset = 0
    names: dict[str, str] = {}
    settings: dict[int | None, int | None] = {}
    for ex in exchanges:
        if not isinstance(ex, Exchange):   # the decoder's OrphanResponse: a response whose request is not captured
            skipped["request_missing"] += 1
            continue
        if ex.api_key != FETCH:
            skipped["fetch_snapshot" if ex.api_key == 59 else f"api_key_{ex.api_key}"] += 1
            continue
        if ex.ts is None:
            skipped["request_missing"] += 1
            continue
        record = dumps(_spilled(ex))
        write(record)
        seen = _Seen(ex, offset, len(record))
        # One string object per client, broker and client id, not one per exchange (a storm's 100,000
        # connections held three copies each)
        seen.client = names.setdefault(seen.client, seen.client)
        seen.broker = names.setdefault(seen.broker, seen.broker)
        if seen.client_id is not None:
            seen.client_id = names.setdefault(seen.client_id, seen.client_id)
        # ... and one int object for a client's request settings (max wait 500 and max bytes 52428800 were two
        # more objects per planned fetch)
        seen.max_wait_ms = settings.setdefault(seen.max_wait_ms, seen.max_wait_ms)
        seen.max_bytes = settings.setdefault(seen.max_bytes, seen.max_bytes)
        by_stream.setdefault((seen.client, seen.broker, ex.conn), []).append(seen)
        offset += len(record)
    del names
    all_ex = [e for group in by_stream.values() for e in group]
    if not all_ex:
        return ReplayPlan(0.0, 0, [], {}, Timeline(), skipped)
    request_ts = [cast(float, e.ts) for e in all_ex]  # every planned exchange has one (checked above)
    start_ts = min(request_ts)
    end_ts = max(max(t, e.response_ts or t) for t, e in zip(request_ts, all_ex))
    del all_ex, request_ts

    def ms(ts: float) -> int:
        return int(round((ts - start_ts) * 1000.0))

    # The log: walk every exchange in response order so each read sees the latest captured state.
    topics: dict[str, TopicInfo] = {}
    logs: dict[str, dict[tuple[str, int], _Log]] = {}  # broker -> (topic, partition) -> log
    streams: list[ClientStream] = []
    groups: list[list[Any]] = list(by_stream.values())     # (each _Seen let go once its step is planned)
    del by_stream   # (its keys: a storm's 100,000 of them, 16 MB)
    for group in groups:
        group.sort(key=lambda e: (e.ts, e.correlation_id))
    order = sorted(
        (e.response_ts if e.response_ts is not None else e.ts, i, j) for i, g in enumerate(groups) for j, e in enumerate(g)
    )
    # Per stream and step: the step's PlannedFetch (before it, the wanted tuple once its request is applied)
    planned: list[list[Any]] = [[None] * len(g) for g in groups]
    # What the streams and the timeline need of the exchanges, taken now, so that each exchange's _Seen can go as
    # soon as its step is planned (a storm's 150,000 of them held to the end were 45 MB of the plan's peak): each
    # step's request and response time in microseconds (None: no response), step j of stream i at at[i] + j.
    at: list[int] = []
    us_request: list[int] = []
    us_response: list[int | None] = []
    for i, group in enumerate(groups):
        at.append(len(us_request))
        for e in group:
            us_request.append(_us(cast(float, e.ts) - start_ts))
            us_response.append(None if e.response_ts is None else _us(e.response_ts - start_ts))
        streams.append(ClientStream(
            index=i,
            client=group[0].client,
            broker=group[0].broker,
            client_id=next((e.client_id for e in group if e.client_id), None),
            behaviour=classify(group),
            is_follower=any((e.replica_id or -1) >= 0 for e in group),
            fetches=planned[i],
        ))
    # Per stream: the wanted set (client-side view), rebuilt request by request.
    # (made at the stream's first request: a storm's 100,000 empty dicts made at once took 6 MB)
    wanted_state: list[dict[TopicPartition, WantedPartition] | None] = [None] * len(groups)
    # Interning: one key object per partition for the whole plan, and per stream the same WantedPartition /
    # PartitionResult object again while its value is unchanged, so the simulation's dict lookups hit identical
    # objects and the engine's "same result object" fast path fires (values are equal either way).
    interned: dict[tuple, tuple[TopicPartition, TopicIdPartition]] = {}
    last_reads: list[ReadResults | None] = [None] * len(groups)    # (None: no step's reads made yet)
    # Requests must be applied in request order within a stream; responses are globally ordered. Requests of one
    # stream are sorted, so applying request j when its response comes up keeps per-stream order only if responses
    # come in request order; handle pipelined requests by applying all pending requests up to j first.
    applied = [0] * len(groups)
    last_wanted: list[tuple] = [() for _ in groups]
    # Each step's spilled partitions are read when its turn comes, by offset: files read one after another whose
    # times overlap (one capture per broker) are planned in time order without holding one while reading the other.
    # (request, forgotten, response partitions) of the steps whose request was applied before their response's turn
    # (pipelined requests), until that turn:
    applied_early: dict[tuple[int, int], tuple] = {}
    # LATER_IF_MANY: reads held (True) while they are few, every step kept in ``later`` too until the end decides
    later = LaterReads(spill, [len(g) for g in groups]) if with_reads in (LATER, LATER_IF_MANY) else None
    held_entries, hold_up_to = 0, HELD_READS_LIMIT
    if with_reads == LATER_IF_MANY:
        with_reads = True
    loads = marshal.loads
    seek = spill.seek
    take = spill.read
    for _t, i, j in order:
        while applied[i] <= j:
            seen = groups[i][applied[i]]
            seek(seen.offset)
            parts = applied_early[(i, applied[i])] = loads(take(seen.size))
            state = wanted_state[i]
            if state is None:
                state = wanted_state[i] = {}
            _apply_request(seen, parts, state, topics, interned, settings)
            planned_wanted = tuple(state.values())
            if planned_wanted == last_wanted[i]:   # identical objects: compared by identity, in C
                planned_wanted = last_wanted[i]    # one tuple while the set is unchanged (ClientModel reuses it)
            last_wanted[i] = planned_wanted
            planned[i][applied[i]] = planned_wanted
            applied[i] += 1
            if applied[i] == len(groups[i]):
                wanted_state[i] = _APPLIED    # the stream's every request is in: its client-side view can go
        seen = groups[i][j]
        parts = applied_early.pop((i, j), None)
        if parts is None:
            seek(seen.offset)
            parts = loads(take(seen.size))
        response_partitions = parts[2]
        summed = 0
        for rp in response_partitions or ():
            summed += rp[_RECORDS_BYTES]
            info = topics.get(rp[_TOPIC] or rp[_TOPIC_ID] or "?")
            if info is not None:
                info.records_bytes += rp[_RECORDS_BYTES]
                info.partitions.add(rp[_PARTITION])
        records_bytes = None if response_partitions is None else summed
        wanted = planned[i][j]
        if later is not None:
            later.add(i, j, seen.offset, seen.size)
            held_entries += len(wanted) + STEP_ENTRIES
            if with_reads is True and held_entries > hold_up_to:
                # Too many to hold: the reads made so far are dropped, and all are made while simulating.
                with_reads = LATER
                for fetches in planned:
                    for f in fetches:
                        if isinstance(f, PlannedFetch):
                            _set(f, "reads", _NO_READS)
                logs.clear()
                last_reads.clear()
        groups[i][j] = None     # (its step is planned now)
        if with_reads is not True:
            planned[i][j] = _planned_fetch(seen, ms, wanted, _NO_READS, records_bytes)
            continue
        broker_logs = logs.get(seen.broker)
        if broker_logs is None:
            broker_logs = logs[seen.broker] = {}
        previous = last_reads[i]
        reads = last_reads[i] = _step_reads(wanted, _read_response(broker_logs, response_partitions), broker_logs,
                                            ReadResults() if previous is None else previous)
        planned[i][j] = _planned_fetch(seen, ms, wanted, reads, records_bytes)

    # What the walk needed goes before the timeline is made (a storm's order alone: 150,000 tuples, 15 MB)
    del order, applied, applied_early, wanted_state, last_wanted, last_reads, logs
    # The timeline in time order: each event's sort key (request or response time in microseconds, then a
    # response after its own request at equal times, the event's time in ms, its phase, stream and step) packed
    # into one int, every part below its radix, so that ints order as the key tuples would. A list of ints sorts
    # faster than one of tuples and takes a third of the memory (a storm's 300,000 events: 15 MB, not 52).
    del groups
    steps = max(len(fetches) for fetches in planned)
    count = steps * len(planned)    # radix of (stream, step)
    ms_radix = ms(end_ts) + 1       # every t_ms and response_t_ms is in 0..ms(end_ts)
    keys: list[int] = []
    add = keys.append
    for i, fetches in enumerate(planned):
        base = i * steps
        first_step = at[i]
        for j, f in enumerate(fetches):
            t_req = us_request[first_step + j]
            add((((t_req * 3 + 1) * ms_radix + f.t_ms) * 2 + REQUEST) * count + base + j)
            t_resp = us_response[first_step + j]
            if t_resp is not None:
                # A response never precedes its own request, even when both fall in the same microsecond.
                add((((t_resp * 3) * ms_radix + cast(int, f.response_t_ms)) * 2 + RESPONSE) * count + base + j
                    if t_resp > t_req else (((t_req * 3 + 2) * ms_radix + f.t_ms) * 2 + RESPONSE) * count + base + j)
    del at, us_request, us_response
    keys.sort()
    timeline = Timeline()
    event = timeline.append
    for key in keys:
        key, place = divmod(key, count)
        i, j = divmod(place, steps)
        event((key >> 1) % ms_radix, key & 1, i, j)
    del keys
    link_reconnects(streams)
    if with_reads is True:
        later = None    # (LATER_IF_MANY, few reads: held)
    if later is not None:
        spill.flush()   # read back with os.pread, past the file object's buffer
    return ReplayPlan(start_ts, ms(end_ts), streams, topics, timeline, skipped, interned, later)


def _read_response(broker_logs: dict[tuple[str, int], _Log], response_partitions: tuple | None
                   ) -> dict[tuple[str, int], tuple]:
    """Bring the broker's logs up to one captured response; its partitions by (topic, partition) tuples (equal
    to, and hashed like, the TopicPartition keys of the wanted set)."""
    in_response = {}
    for rp in response_partitions or ():
        key = (rp[_TOPIC] or rp[_TOPIC_ID] or "?", rp[_PARTITION])
        in_response[key] = rp
        log = broker_logs.get(key)
        if log is None:
            log = broker_logs[key] = _Log()
        if rp[_ERROR] == 0 and rp[_HW] >= 0:
            log.update(rp[_HW], rp[_R_LOG_START], rp[_LSO])
    return in_response


def _step_reads(wanted: tuple[WantedPartition, ...], in_response: dict, broker_logs: dict[tuple[str, int], _Log],
                previous: ReadResults) -> ReadResults:
    """What a read of each wanted partition gives at this step: the response's partition, else the broker's
    latest knowledge of it. The reads say which partitions' results are not the very objects of the stream's
    ``previous`` reads, so that the engine's incremental response visits only those (sessions.ReadResults)."""
    reads = ReadResults(since=previous)
    last = previous.get
    changed: list = []
    for w in wanted:
        key = w.key
        before = last(key)
        got = in_response.get(w.tp) if in_response else None
        if got is None:
            log = broker_logs.get(w.tp)
            result = _NOTHING_READ if log is None else log.result or log.read()
        else:
            hw = got[_HW]
            stable = got[_LSO]
            if stable == hw:
                stable = hw     # one int object for both (the plan holds a result per partition and response)
            # The previous result again when equal (PartitionResult equality, field by field, without making one).
            if (before is not None and before.error_code == got[_ERROR] and before.high_watermark == hw
                    and before.last_stable_offset == stable and before.log_start_offset == got[_R_LOG_START]
                    and before.records_size == got[_RECORDS_BYTES] and before.diverging_epoch == got[_DIVERGING]
                    and before.preferred_read_replica == got[_PREFERRED]):
                result = before
            else:
                result = PartitionResult(got[_ERROR], hw, stable, got[_R_LOG_START], got[_RECORDS_BYTES],
                                         got[_DIVERGING], got[_PREFERRED])
        reads[key] = result
        if result is not before:
            changed += (key, result)
    if len(reads) == len(wanted):
        reads.changed = tuple(changed)   # what settle() works out, in one pass
    else:
        # Two wanted partitions share one broker key (a topic seen under its name and under its id): the later
        # read is the one the mapping keeps, and settle() says so.
        reads.settle()
    return reads


class LaterReads:
    """Every step's reads of a plan built with_reads=LATER, made again when a simulation needs them.

    The reads are the broker's log state at each step, and that state comes from walking every captured response
    in response order. Held for the whole plan they grow with the capture (about 260 MB per GB); here only where
    each step's partitions lie in the spill is kept, and ``reader`` walks the responses again during a simulation,
    so that at any moment only the reads of steps made and not yet answered are alive. The walk is build_plan's
    own (_read_response, _step_reads, the same order), so every read, and every sharing of one result object
    between steps and streams that the engine's fast paths rely on, is what the plan would have held.
    """

    __slots__ = ("spill", "order", "first", "offsets", "sizes")

    def __init__(self, spill: BinaryIO, steps: list[int]) -> None:
        self.spill = spill
        self.order = array("q")   # stream index << 32 | step index, in response order
        # Where each step's partitions lie in the spill, every stream's steps in one array: one array per stream
        # took 240 bytes a connection on a storm.
        self.first, total = step_starts(steps)
        self.offsets = array("q", bytes(8 * total))
        self.sizes = array("q", bytes(8 * total))

    def add(self, i: int, j: int, offset: int, size: int) -> None:
        self.order.append(i << 32 | j)
        at = self.first[i] + j
        self.offsets[at] = offset
        self.sizes[at] = size

    def reader(self, streams: list[ClientStream], mine: list[bool] | None = None) -> Callable[[int, int], ReadResults]:
        """``take(i, j)``: the reads of step j of stream i, once per step, in any order (the steps made before
        one is asked for wait in a buffer). ``mine``: per stream, whether the caller will ask for its steps (a
        simulation of some brokers only); the walk skips the others."""
        return _ReadsWalk(self, streams, mine).take

    def each(self, streams: list[ClientStream]) -> Iterator[tuple[int, int, ReadResults]]:
        """(stream index, step index, reads) of every step, in response order, each made as it is reached and
        let go by the walk once the stream's next step is made."""
        take = self.reader(streams)
        for step in self.order:
            i, j = step >> 32, step & 0xFFFFFFFF
            yield i, j, take(i, j)


def step_starts(steps: Iterable[int]) -> tuple[array, int]:
    """Every stream's steps in one array, from each stream's number of steps: where each stream's start (step j
    of stream i at starts[i] + j), and how many steps there are in all."""
    starts = array("q")
    total = 0
    for n in steps:
        starts.append(total)
        total += n
    return starts, total


def every_read(plan: ReplayPlan) -> Iterator[tuple[int, int, dict[TopicIdPartition, PartitionResult]]]:
    """(stream index, step index, reads) of every step of the plan: its held reads, stream by stream, or those
    of a plan built with_reads=LATER made again one at a time (in response order)."""
    if plan.later_reads is not None:
        yield from plan.later_reads.each(plan.streams)
        return
    for s in plan.streams:
        for j, f in enumerate(s.fetches):
            yield s.index, j, f.reads


class _ReadsWalk:
    __slots__ = ("later", "streams", "mine", "read", "pos", "logs", "last", "left", "ready", "taken", "untaken")

    def __init__(self, later: LaterReads, streams: list[ClientStream], mine: list[bool] | None) -> None:
        self.later = later
        self.streams = streams
        self.mine = mine
        spill = later.spill
        if isinstance(spill, io.BytesIO):
            view = spill.getbuffer()
            self.read: Callable[[int, int], Any] = lambda offset, size: view[offset:offset + size]
        else:
            # pread: forked simulations of other brokers share the file's offset
            fd = spill.fileno()
            self.read = lambda offset, size: os.pread(fd, size, offset)
        self.pos = 0
        self.logs: dict[str, dict[tuple[str, int], _Log]] = {}
        self.last: list[ReadResults | None] = [None] * len(streams)     # the stream's latest reads made
        self.left = [len(s.fetches) for s in streams]                  # steps of the stream not made yet
        self.ready: dict[tuple[int, int], ReadResults] = {}
        self.taken: list[ReadResults | None] = [None] * len(streams)
        self.untaken = array("q", self.left)   # steps of the stream not taken yet

    def take(self, i: int, j: int) -> ReadResults:
        reads = self.ready.pop((i, j), None)
        if reads is None:
            reads = self._walk_to(i, j)
        # The stream's reads answered before these were only kept for what these say changed since them.
        before = self.taken[i]
        if before is not None:
            before.since = None
        self.untaken[i] -= 1
        # (once a stream's every step is taken, nothing asks for its reads again: a storm's ended connections
        # hold none)
        self.taken[i] = reads if self.untaken[i] else None
        return reads

    def _walk_to(self, i: int, j: int) -> ReadResults:
        later, mine, streams, ready = self.later, self.mine, self.streams, self.ready
        order, first, offsets, sizes = later.order, later.first, later.offsets, later.sizes
        read, loads = self.read, marshal.loads
        pos = self.pos
        while True:
            step = order[pos]
            pos += 1
            si, sj = step >> 32, step & 0xFFFFFFFF
            if mine is not None and not mine[si]:
                continue
            stream = streams[si]
            broker_logs = self.logs.get(stream.broker)
            if broker_logs is None:
                broker_logs = self.logs[stream.broker] = {}
            at = first[si] + sj
            response_partitions = loads(read(offsets[at], sizes[at]))[2]
            previous = self.last[si]
            reads = _step_reads(stream.fetches[sj].wanted, _read_response(broker_logs, response_partitions),
                                broker_logs, ReadResults() if previous is None else previous)
            self.left[si] -= 1
            self.last[si] = reads if self.left[si] else None
            if si == i and sj == j:
                self.pos = pos
                return reads
            ready[(si, sj)] = reads


def session_after(fetch: PlannedFetch) -> int:
    """The session id the captured client holds after this exchange, by FetchSessionHandler's rules: a failed or
    unanswered request keeps it (the next request is (id, 0)), a 70 or a response without one drops it."""
    if fetch.error_code is None:
        return fetch.session_id
    if fetch.error_code:
        return 0 if fetch.error_code == 70 else fetch.session_id
    return fetch.response_session_id or 0


def link_reconnects(streams: list[ClientStream]) -> None:
    """Set ``follows`` on each stream that is a client's next connection to the same broker.

    A client is what analyze calls one: its host and client id. Kafka's consumer keeps one FetchSessionHandler
    per broker node for its whole life, so after a lost connection it goes on with the session it held. A
    connection follows an earlier one of the same client when it starts after that one ended, that one did not
    close its session (epoch -1: the client was closed), and the capture shows the session carried over: the new
    connection's first request names the session id the client held (or both hold none). A client restarted
    under the same id starts again from (0, 0) and is not linked.
    """
    # Per client and session id held at the end: the last stream of each chain that a later connection opening
    # with that id could follow, in the order they became tails, with its end. Kept by the id it ends with, so
    # that a connection looks only at the chains it could follow (a storm of 100,000 connections of one client,
    # each with its own session, was quadratic when every connection looked at every chain).
    tails: dict[tuple, list[tuple[int, ClientStream]]] = {}
    for s in sorted(streams, key=lambda s: (s.fetches[0].t_ms, s.index)):
        client = (s.host, s.client_id, s.broker, s.is_follower, s.behaviour)
        first = s.fetches[0]
        chains = tails.get(client + (first.session_id,))
        if chains:
            before = None
            latest = 0
            at = -1
            for n, (end, t) in enumerate(chains):
                # the connection that ended last (the first of equals), before this one started
                if end <= first.t_ms and (before is None or end > latest):
                    before, latest, at = t, end, n
            if before is not None:
                s.follows = before.index
                del chains[at]
        last = s.fetches[-1]
        if not (s.behaviour == SESSION and last.epoch == -1):   # a closed client is followed by none
            tails.setdefault(client + (session_after(last),), []).append(
                (max(last.t_ms, last.response_t_ms or 0), s))


def _us(seconds: float) -> int:
    return int(round(seconds * 1_000_000))


def _apply_request(ex: _Seen, parts: tuple, wanted: dict[TopicPartition, WantedPartition],
                   topics: dict[str, TopicInfo], interned: dict[tuple, tuple[TopicPartition, TopicIdPartition]],
                   settings: dict | None = None) -> None:
    """Update a client's wanted set with one request (``parts``: its spilled request and forgotten partitions): a
    full request replaces it, an incremental one edits it."""
    epoch = ex.session_epoch if ex.session_epoch is not None else -1
    full = ex.api_version < 7 or epoch in (0, -1)
    if full:
        wanted.clear()
    for fp in parts[1]:
        name = fp[_TOPIC] or fp[_TOPIC_ID] or "?"
        wanted.pop(TopicPartition(name, fp[_PARTITION]), None)
    ids = ex.api_version >= 13
    for rp in parts[0]:
        name = rp[_TOPIC] or rp[_TOPIC_ID] or "?"
        partition = rp[_PARTITION]
        tid = _uuid(rp[_TOPIC_ID]) if ids else ZERO_UUID
        info = topics.get(name)
        if info is None:
            info = topics[name] = TopicInfo(name, tid if tid.int else None)
        elif info.topic_id is None and tid.int:
            info.topic_id = tid
        info.partitions.add(partition)
        ikey = (name, partition, tid)
        keys = interned.get(ikey)
        if keys is None:
            keys = interned[ikey] = (TopicPartition(name, partition), TopicIdPartition(tid, name, partition))
        tp, key = keys
        # An altered partition moves to the end, as the client's session map does. An unchanged one keeps its
        # WantedPartition object (same value, and identity lets the client's Builder skip the comparison). The
        # same key means the same topic id, so the other five fields decide.
        before = wanted.pop(tp, None)
        if before is not None and before.key is key:
            d = before.data
            if (d.fetch_offset == rp[_FETCH_OFFSET] and d.log_start_offset == rp[_LOG_START]
                    and d.max_bytes == rp[_PARTITION_MAX_BYTES] and d.current_leader_epoch == rp[_LEADER_EPOCH]
                    and d.last_fetched_epoch == rp[_LAST_FETCHED_EPOCH]):
                wanted[tp] = before
                continue
        max_bytes = rp[_PARTITION_MAX_BYTES]
        if settings is not None:    # one int object for a client's partition byte limit (1 MB on every partition)
            max_bytes = settings.setdefault(max_bytes, max_bytes)
        wanted[tp] = WantedPartition(tp, key, PartitionData(
            rp[_FETCH_OFFSET], rp[_LOG_START], max_bytes, rp[_LEADER_EPOCH], rp[_LAST_FETCHED_EPOCH], tid,
        ))


def _planned_fetch(ex: _Seen, ms, wanted: tuple[WantedPartition, ...], reads, records_bytes: int | None
                   ) -> PlannedFetch:
    t_ms = ms(ex.ts)
    return PlannedFetch(
        t_ms,
        max(t_ms, ms(ex.response_ts)) if ex.response_ts is not None else None,
        ex.api_version,
        ex.replica_id if ex.replica_id is not None else -1,
        ex.max_wait_ms if ex.max_wait_ms is not None else 500,
        ex.min_bytes if ex.min_bytes is not None else 1,
        ex.max_bytes if ex.max_bytes is not None else 52428800,
        ex.isolation_level or 0,
        ex.session_id or 0,
        ex.session_epoch if ex.session_epoch is not None else -1,
        wanted,
        ex.sent,
        ex.forgotten,
        ex.error_code,
        ex.response_session_id,
        ex.throttle_time_ms,
        ex.response_partitions,                 # Exchange.response_partition_count
        records_bytes,                          # Exchange.records_bytes, summed in the caller's pass
        ex.request_bytes,
        ex.response_bytes,
        reads,
        ex.correlation_id,
        ex.request_frame,
    )
