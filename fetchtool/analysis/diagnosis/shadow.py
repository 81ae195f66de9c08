"""A broker's session cache as the capture shows it, replayed through fetchtool.sessions (the one engine).

The tracker records what each exchange did to the broker's cache (`CacheEvent`s); `replay` feeds them, in
broker time, to a FetchSessionCache of a given shape: creations (and their shard, known from the id) at
RESPONSE time, as Kafka creates a session when it builds the full fetch's response, after the long poll;
lookups and touches at request time; closes and emptied sessions at request time; an error 70 as proof that
the session was gone. Which creation evicted which session, stale or by size, is then Kafka's own rule
(FetchSessionCacheShard), never a second model of it.

The cache's shape is often unknown to a capture. `infer` replays every shape the evidence allows (8 shards as
since Kafka 3.8, or one cache as before; slots per shard from 1 up to the most the capture ever shows at once)
and keeps those the capture does not contradict: a session the broker used again was still cached, a 70 proves
it gone, a refusal proves the shard the broker chose was full, a creation proves its shard had room. A fate
(evicted by whom, why) is told only if every shape left agrees on it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

from fetchtool.sessions.cache import DEFAULT_EVICTION_MS, FetchSessionCache, FetchSessionCacheShard, SessionEvicted
from fetchtool.sessions.errors import SessionIdOutOfRange
from fetchtool.sessions.partitions import TopicIdPartition
from fetchtool.sessions.session import CachedPartition, FetchSession

from fetchtool.analysis.diagnosis.occupancy import Occupancy, OccupancyRecorder
from fetchtool.analysis.tracking.cache_events import ABSENT, CREATE, PRESENT, REFUSE, RESTART, TOUCH, CacheEvent, CacheLog

MAX_SHAPES = 160  # replays per broker when the cache size must be inferred (the search stays bounded)
UNBOUNDED = 1 << 30
LONG_AGO_MS = 10**12  # a session alive before the capture: created long before (old enough to be evictable)


@dataclass(frozen=True, slots=True)
class Eviction:
    """Kafka evicted ``victim`` to create ``evictor`` at ``t_ms``; ``idle_ms``: the victim's time unused."""

    victim: object
    evictor: object
    reason: str  # "stale" | "smaller" | "privileged"
    t_ms: int
    idle_ms: int
    victim_size: int
    evictor_size: int


@dataclass(frozen=True, slots=True)
class Shape:
    shards: int
    per_shard: int | None  # None: unbounded

    @property
    def slots(self) -> int | None:
        return None if self.per_shard is None else self.per_shard * self.shards

    def describe(self) -> str:
        if self.per_shard is None:
            return f"more than the capture ever shows ({self.shards} shard{'s' if self.shards > 1 else ''})"
        return f"{self.slots} slots ({self.shards} shard{'s' if self.shards > 1 else ''} of {self.per_shard})"


@dataclass(slots=True)
class Replay:
    """One shape's replay: consistent with the capture or not, the evictions it made, its peak of live sessions."""

    shape: Shape
    consistent: bool
    evictions: dict  # victim key -> Eviction
    peak: int
    contradiction: str | None = None
    occupancy: Occupancy | None = None  # recorded only when asked (one replay per broker, not per shape tried)


class _Partitions:
    """A session's partition map as the cache reads it: only its size counts for eviction."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n


def replay(events: Iterable[CacheEvent], shape: Shape, gone: frozenset = frozenset(),
           eviction_ms: int = DEFAULT_EVICTION_MS, record: bool = False) -> Replay:
    """Feed a broker's cache events to a FetchSessionCache of ``shape``. ``gone``: keys of sessions whose 70
    the capture explains otherwise (a broker restart): removed at their 70 without testing the shape.
    ``record``: keep the live sessions per shard over time (Replay.occupancy)."""
    per_shard = shape.per_shard if shape.per_shard is not None else UNBOUNDED
    cache = FetchSessionCache(per_shard * shape.shards, shape.shards, eviction_ms)
    if shape.shards > 1:
        for shard in cache.shards:
            shard.max_entries = per_shard
    owners: dict[int, object] = {}
    models: dict[int, FetchSession] = {}  # session id -> the engine's FetchSession (kept after eviction: idle time)
    evicted_ids: set[int] = set()
    evictions: dict = {}
    live = peak = 0
    contradiction = None
    recorder = OccupancyRecorder(shape.shards) if record else None
    before: CacheEvent | None = None  # the event whose effect the recorder has not seen yet

    def shard_of(sid: int) -> FetchSessionCacheShard | None:
        try:
            return cache.get_cache_shard(sid)
        except SessionIdOutOfRange:
            return None

    for ev in events:
        if recorder is not None:  # here, not after the event: the branches below end with `continue`
            if before is not None:
                recorder.note(before.t_ms, cache.shards)
            before = ev
        if ev.kind == RESTART:
            for shard in cache.shards:
                for lost in shard.sessions():
                    shard.remove(lost, ev.t_ms, "lost")
            cache.drain_events()
            live = 0
            continue
        now = ev.t_ms
        if ev.kind == REFUSE:  # a refusal names no session, so no shard: the broker's choice is unknown
            if all(s.would_admit(now, ev.privileged, ev.size) for s in cache.shards) and contradiction is None:
                contradiction = "the broker refused a session while every shard had room"
            continue
        sid = ev.session_id
        target = shard_of(sid)
        if target is None:
            if ev.kind == CREATE and contradiction is None:
                contradiction = f"session id {sid} is outside {shape.shards} shards"
            continue
        shard = target
        if ev.kind == CREATE:
            if shard.get(sid) is not None and shard.remove(sid, now, "reissued") is not None:
                live -= 1  # Kafka issues no id a cached session holds: the old one had gone, unseen
            created = shard.create_session_with_id(sid, now, ev.privileged, _Partitions(ev.size))
            if created is None:
                if contradiction is None:
                    contradiction = f"session {sid} was created while its shard had no room"
                cache.drain_events()
                continue
            live += 1
            for out in cache.drain_events():
                if isinstance(out, SessionEvicted):
                    live -= 1
                    evicted_ids.add(out.session_id)
                    victim = models.get(out.session_id)
                    idle = now - victim.last_used_ms if victim is not None else 0
                    if out.session_id in owners:
                        evictions[owners[out.session_id]] = Eviction(
                            owners[out.session_id], ev.key, out.reason, now, idle, out.size, ev.size)
            owners[sid], models[sid] = ev.key, created
            evicted_ids.discard(sid)
            peak = max(peak, live)
        elif ev.kind in (TOUCH, PRESENT):
            session = shard.get(sid)
            if session is None:
                if sid in evicted_ids and contradiction is None:
                    contradiction = f"session {sid} was used after this shape evicted it"
                if ev.kind == PRESENT:
                    continue
                # alive since before the capture (or since an eviction that the contradiction above rejects):
                # it held a slot all along, so it takes a free one and evicts nothing
                if shard.size >= shard.max_entries:
                    if contradiction is None:
                        contradiction = f"session {sid}, alive before the capture, does not fit its shard"
                    continue
                session = shard.create_session_with_id(sid, now - LONG_AGO_MS, ev.privileged,
                                                       _Partitions(ev.size))
                assert session is not None, "the shard had a free slot (checked above), so Kafka admits it"
                cache.drain_events()
                owners[sid], models[sid] = ev.key, session
                live += 1
                peak = max(peak, live)
            if ev.kind == TOUCH:
                # the size-only stand-in create_session_with_id accepts: the cache only counts it, never reads it
                session.partition_map = cast(dict[TopicIdPartition, CachedPartition], _Partitions(ev.size))
                shard.touch(session, now)
        else:  # CLOSE, ABSENT: the session leaves (a 70 proves it had)
            if shard.remove(sid, now, "closed") is not None:
                live -= 1
                if ev.kind == ABSENT and ev.key not in gone and contradiction is None:
                    contradiction = f"session {sid} got error 70 while this shape still held it"
            cache.drain_events()
    if recorder is not None and before is not None:
        recorder.note(before.t_ms, cache.shards)
    return Replay(shape, contradiction is None, evictions, peak, contradiction,
                  recorder.result(shape) if recorder is not None else None)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the capture proves about one broker's cache: the shapes it allows and the fates they agree on."""

    shapes: tuple[Shape, ...]  # consistent shapes (empty: none fits the capture)
    told: bool  # the shape was given (--cache-slots), not inferred
    evictions: dict  # victim key -> Eviction, where every consistent shape agrees
    peak: int  # most live sessions at once (the least of the consistent shapes: a lower bound)
    occupancy: Occupancy | None = None  # live sessions over time in the shape whose peak is ``peak``

    def bounds(self) -> str:
        if not self.shapes:
            return ("no cache size fits the capture by Kafka's rules (sessions alive before it began, a restart, or a "
                    "broker whose cache works otherwise would explain it)")
        bounded = sorted({s.slots for s in self.shapes if s.slots is not None})
        if any(s.slots is None for s in self.shapes):
            return (f"at least {bounded[0]} slots" if bounded else "any size") + " fit the capture"
        return (f"{bounded[0]} slots" if len(bounded) == 1 else f"{bounded[0]} to {bounded[-1]} slots") + \
            " fit the capture"


def infer(events: list[CacheEvent] | CacheLog, slots: int | None, shards: int | None, evidence: bool,
          gone: frozenset = frozenset(), eviction_ms: int = DEFAULT_EVICTION_MS) -> Verdict:
    """Replay the shapes the evidence allows. ``evidence``: the capture holds a refusal or an unexplained 70
    (without one, nothing bounds the cache from above and no eviction can be proven)."""
    # (a CacheLog makes each event as the replays read it: the sorted events are never all held at once)
    ordered: Iterable[CacheEvent] = events.ordered() if isinstance(events, CacheLog) else sorted(events, key=_order)
    if slots is not None:
        n = shards or 8
        r = replay(ordered, Shape(n, max(slots // n, 0)), gone, eviction_ms, record=True)
        return Verdict((r.shape,), True, dict(r.evictions), r.peak, r.occupancy)
    # Without evidence only an unbounded cache is kept, and it evicts nothing whatever its shards: one replay.
    shard_counts = (shards,) if shards else ((8, 1) if evidence else (8,))
    results = []
    alone = not evidence and len(shard_counts) == 1  # the only shape tried: record its occupancy on the way
    for n in shard_counts:
        free = replay(ordered, Shape(n, None), gone, eviction_ms, record=alone)
        results.append(free)
        if not evidence:
            continue
        top = min(free.peak, MAX_SHAPES)
        results.extend(replay(ordered, Shape(n, c), gone, eviction_ms) for c in range(1, top + 1))
    fits = [r for r in results if r.consistent]
    if not evidence:
        fits = [r for r in fits if r.shape.per_shard is None] or fits
    if not fits:
        return Verdict((), False, {}, proven_peak(ordered))
    agreed = dict(fits[0].evictions)
    for r in fits[1:]:
        agreed = {k: e for k, e in agreed.items() if _same(r.evictions.get(k), e)}
    settled = min(fits, key=lambda r: r.peak)  # the first of the shapes that show the least: the reported peak
    shown = settled.occupancy if settled.occupancy is not None else \
        replay(ordered, settled.shape, gone, eviction_ms, record=True).occupancy
    return Verdict(tuple(r.shape for r in fits), False, agreed, settled.peak, shown)


def proven_peak(events: Iterable[CacheEvent]) -> int:
    """The most sessions the capture proves cached at once, whatever the cache's shape: each from its creation
    (or first use) to its last use, when the broker found it. A lower bound, for captures no shape fits."""
    spans: dict[int, list[int]] = {}
    for ev in events:
        if ev.kind in (CREATE, TOUCH, PRESENT):
            span = spans.get(ev.session_id)
            if span is None or (ev.kind == CREATE and span[1] < ev.t_ms):
                spans[ev.session_id] = [ev.t_ms, ev.t_ms]
            else:
                span[1] = ev.t_ms
    points = sorted([(a, 1) for a, _ in spans.values()] + [(b, -1) for _, b in spans.values()],
                    key=lambda p: (p[0], -p[1]))
    peak = live = 0
    for _, step in points:
        live += step
        peak = max(peak, live)
    return peak


def _same(a: Eviction | None, b: Eviction) -> bool:
    return a is not None and a.evictor is b.evictor and a.reason == b.reason


def _order(ev: CacheEvent) -> tuple:
    return (ev.t_ms, ev.kind, ev.seq)
