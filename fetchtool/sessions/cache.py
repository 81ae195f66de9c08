"""The broker's fetch session cache: FetchSessionCacheShard and the sharded FetchSessionCache (KAFKA-9401, 3.8).

Port of server/src/main/java/org/apache/kafka/server/FetchSessionCacheShard.java and
FetchSession.FetchSessionCache. Kafka keeps three TreeMaps per shard (lastUsed by (lastUsedMs, id), and the two
evictable sets by EvictableKey(privileged, size, id)); here they are heaps with lazy deletion, because only their
first entry is ever read and a touch happens on every incremental request. An entry is live while it still
matches the session's current state; stale entries are dropped when they reach the top, and a heap is rebuilt
once dead entries outnumber live ones.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterator, Literal, Sized, cast

from .errors import SessionIdOutOfRange
from .metadata import INITIAL_EPOCH, INVALID_SESSION_ID, MAX_INT, next_epoch
from .partitions import TopicIdPartition
from .session import CachedPartition, FetchSession

EvictionReason = Literal["stale", "smaller", "privileged"]

_heappush = heapq.heappush

DEFAULT_MAX_SLOTS = 1000                 # max.incremental.fetch.session.cache.slots
DEFAULT_SHARDS = 8                       # KafkaBroker.NumFetchSessionCacheShards (hard-coded)
DEFAULT_EVICTION_MS = 120_000            # KafkaServer.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS (not a config)
DEFAULT_MAX_EVENTS = 100_000


# ---------------------------------------------------------------------------------------------- events
@dataclass(frozen=True, slots=True)
class SessionCreated:
    session_id: int
    now_ms: int
    privileged: bool
    size: int
    shard: int


@dataclass(frozen=True, slots=True)
class SessionEvicted:
    """A session pushed out to make room. ``reason``: "stale" (LRU entry unused > eviction_ms), "smaller"
    (the newcomer has more partitions) or "privileged" (a follower session displaced a consumer session).
    ``evicted_by`` is the new session's id."""

    session_id: int
    now_ms: int
    privileged: bool
    size: int
    reason: EvictionReason
    evicted_by: int
    shard: int


@dataclass(frozen=True, slots=True)
class SessionRemoved:
    """A session dropped without eviction. ``reason``: "closed" (a full request named it), "empty" (an
    incremental request forgot its last partition) or "removed" (a direct call). ``now_ms`` is None when the
    caller gave no time."""

    session_id: int
    now_ms: int | None
    privileged: bool
    size: int
    reason: str
    shard: int


SessionEvent = SessionCreated | SessionEvicted | SessionRemoved


class EvictionMeter:
    """Kafka's IncrementalFetchSessionEvictionsPerSec meter, reduced to its count (the engine has no clock)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def mark(self) -> None:
        self.count += 1


class _EventLog:
    """Bounded event buffer: a caller that never drains cannot make a long-running broker grow without end."""

    __slots__ = ("events", "enabled")

    def __init__(self, max_events: int = DEFAULT_MAX_EVENTS, enabled: bool = True) -> None:
        self.events: deque[SessionEvent] = deque(maxlen=max_events)
        self.enabled = enabled

    def append(self, event: SessionEvent) -> None:
        if self.enabled:
            self.events.append(event)

    def drain(self) -> list[SessionEvent]:
        out = list(self.events)
        self.events.clear()
        return out


def to_positive(n: int) -> int:
    """Kafka's Utils.toPositive: clear the sign bit of a 32-bit int."""
    return n & 0x7FFFFFFF


# ---------------------------------------------------------------------------------------------- shard
class FetchSessionCacheShard:
    """One shard: at most ``max_entries`` sessions with ids in [max(1, shard_num*range), (shard_num+1)*range)."""

    def __init__(self, max_entries: int, eviction_ms: int, session_id_range: int = MAX_INT, shard_num: int = 0,
                 rng: random.Random | None = None, meter: EvictionMeter | None = None,
                 events: _EventLog | None = None) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.session_id_range = session_id_range
        self.shard_num = shard_num
        self.rng = rng if rng is not None else random.Random(0)
        self.evictions_meter = meter if meter is not None else EvictionMeter()
        self._events = events if events is not None else _EventLog()
        self._sessions: dict[int, FetchSession] = {}
        self._num_partitions = 0
        self._seq = 0
        # Heaps standing in for Kafka's TreeMaps; see the module docstring.
        self._last_used: list[tuple[int, int, int, FetchSession]] = []
        self._by_all: list[tuple[bool, int, int, int, FetchSession]] = []
        self._by_priv: list[tuple[bool, int, int, int, FetchSession]] = []

    # -- queries
    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    @property
    def size(self) -> int:
        return len(self._sessions)

    @property
    def total_partitions(self) -> int:
        """Sum of the sessions' partition counts as of their last touch."""
        return self._num_partitions

    def sessions(self) -> Iterator[FetchSession]:
        return iter(list(self._sessions.values()))

    def drain_events(self) -> list[SessionEvent]:
        return self._events.drain()

    def new_session_id(self) -> int:
        """A random id in this shard's range, not in use here and never 0."""
        lo = max(1, self.shard_num * self.session_id_range)
        hi = (self.shard_num + 1) * self.session_id_range
        while True:
            sid = self.rng.randrange(lo, hi)
            if sid != INVALID_SESSION_ID and sid not in self._sessions:
                return sid

    # -- creation and eviction
    def maybe_create_session(self, now_ms: int, privileged: bool, size: int, uses_topic_ids: bool,
                             create_partitions: Callable[[], dict[TopicIdPartition, CachedPartition]]) -> int:
        """Create a session if there is room or one entry can be evicted; return its id, else 0."""
        session = self._admit(now_ms, privileged, size, lambda: FetchSession(
            self.new_session_id(), privileged, create_partitions(), uses_topic_ids, now_ms, now_ms,
            next_epoch(INITIAL_EPOCH)))
        return session.id if session is not None else INVALID_SESSION_ID

    def create_session_with_id(self, session_id: int, now_ms: int, privileged: bool,
                               partition_map: Sized, uses_topic_ids: bool = True) -> FetchSession | None:
        """maybeCreateSession for a session whose id is already known (a replay of the creations a broker was
        seen to make): the same room and eviction rules, the given id. None if Kafka would have refused it."""
        # A replay of seen creations may pass a size-only stand-in: such a session is counted, never read.
        partitions = cast(dict[TopicIdPartition, CachedPartition], partition_map)
        return self._admit(now_ms, privileged, len(partition_map), lambda: FetchSession(
            session_id, privileged, partitions, uses_topic_ids, now_ms, now_ms, next_epoch(INITIAL_EPOCH)))

    def would_admit(self, now_ms: int, privileged: bool, size: int) -> bool:
        """Whether a new session of ``size`` partitions would get a slot now (room, or an entry to evict), without
        changing anything: a refusal the broker answered proves this false for the shard it chose."""
        return len(self._sessions) < self.max_entries or self._victim(privileged, (privileged, size, 0),
                                                                      now_ms) is not None

    def _admit(self, now_ms: int, privileged: bool, size: int,
               make_session: Callable[[], FetchSession]) -> FetchSession | None:
        evicted = None
        if len(self._sessions) < self.max_entries or (
                evicted := self._try_evict(privileged, (privileged, size, 0), now_ms)) is not None:
            session = make_session()
            self._sessions[session.id] = session
            self.touch(session, now_ms)
            if self._events.enabled:  # (a cache nobody reads the events of makes none: the savings model's)
                if evicted is not None:
                    victim, reason = evicted
                    self._events.append(SessionEvicted(victim.id, now_ms, victim.privileged, victim.cached_size,
                                                       reason, session.id, self.shard_num))
                self._events.append(SessionCreated(session.id, now_ms, privileged, session.cached_size,
                                                   self.shard_num))
            return session
        return None

    def _try_evict(self, privileged: bool, key: tuple, now_ms: int) -> tuple[FetchSession, EvictionReason] | None:
        """Evict one entry for a newcomer with EvictableKey ``key``: (victim, reason), or None."""
        found = self._victim(privileged, key, now_ms)
        if found is not None:
            self._remove(found[0])
            self.evictions_meter.mark()
        return found

    def _victim(self, privileged: bool, key: tuple, now_ms: int) -> tuple[FetchSession, EvictionReason] | None:
        """The entry a newcomer with EvictableKey ``key`` would evict, and why; None if none may be.

        A new entry A may evict B if A is privileged and B is not, or B is stale (unused > eviction_ms), or A
        has more partitions than B and B was not recently created. Only the single LRU entry is tested for
        staleness, and only the single least valuable evictable entry otherwise.
        """
        lru = self._first_last_used()
        if lru is None:
            return None
        if now_ms - lru.last_used_ms > self.eviction_ms:       # strictly greater
            return lru, "stale"
        heap = self._by_priv if privileged else self._by_all
        first = self._first_evictable(heap, privileged)
        if first is None:
            return None
        if key < (first.privileged, first.cached_size, first.id):   # the newcomer is less valuable
            return None
        return first, ("privileged" if privileged and not first.privileged else "smaller")

    # -- removal
    def remove(self, session: FetchSession | int, now_ms: int | None = None, reason: str = "removed"
               ) -> FetchSession | None:
        """Remove a session (object or id); returns it, or None if it was not in this shard."""
        if isinstance(session, int):
            found = self._sessions.get(session)
            if found is None:
                return None
            session = found
        if self._remove(session) is None:
            return None
        self._events.append(SessionRemoved(session.id, now_ms, session.privileged, session.cached_size, reason,
                                           self.shard_num))
        return session

    def _remove(self, session: FetchSession) -> FetchSession | None:
        # Heap entries die with the session (they are validated against self._sessions).
        if self._sessions.get(session.id) is not session:
            return None
        del self._sessions[session.id]
        self._num_partitions -= session.cached_size
        session._in_all = session._in_priv = False
        return session

    # -- touch
    def touch(self, session: FetchSession, now_ms: int) -> None:
        """Record a use: re-key lastUsed and the evictable sets with the current size.

        Membership of the evictable sets is decided here and only here: by privileged newcomers if the session
        is unprivileged or older than eviction_ms; by all if it is older than eviction_ms.
        """
        self._seq = seq = self._seq + 1
        session.last_used_ms = now_ms
        if session._lu_pushed != now_ms:
            session._lu_pushed = now_ms
            _heappush(self._last_used, (now_ms, session.id, seq, session))
        old_size = session.cached_size
        size = len(session.partition_map)
        session.cached_size = size
        self._num_partitions += size - old_size if old_size != -1 else size
        old_size_pushed = session._size_pushed
        session._size_pushed = size
        old_all, old_priv = session._in_all, session._in_priv
        aged = now_ms - session.creation_ms > self.eviction_ms
        privileged = session.privileged
        session._in_priv = in_priv = (not privileged) or aged
        session._in_all = aged
        # A session already in a set under its current size keeps its entry (the common, steady-state touch).
        if in_priv and (not old_priv or old_size_pushed != size):
            _heappush(self._by_priv, (privileged, size, session.id, seq, session))
        if aged and (not old_all or old_size_pushed != size):
            _heappush(self._by_all, (privileged, size, session.id, seq, session))
        limit = 2 * len(self._sessions) + 64
        if len(self._last_used) > limit or len(self._by_priv) > limit or len(self._by_all) > limit:
            self._maybe_compact()

    # -- heap helpers
    def _first_last_used(self) -> FetchSession | None:
        heap, sessions = self._last_used, self._sessions
        while heap:
            lu, sid, _, s = heap[0]
            if sessions.get(sid) is s and s.last_used_ms == lu:
                return s
            heapq.heappop(heap)
        return None

    def _first_evictable(self, heap: list[tuple[bool, int, int, int, FetchSession]], privileged_set: bool
                         ) -> FetchSession | None:
        sessions = self._sessions
        while heap:
            _, size, sid, _, s = heap[0]
            if (sessions.get(sid) is s and s.cached_size == size
                    and (s._in_priv if privileged_set else s._in_all)):
                return s
            heapq.heappop(heap)
        return None

    def _maybe_compact(self) -> None:
        limit = 2 * len(self._sessions) + 64
        if len(self._last_used) > limit:
            self._seq += 1
            self._last_used = [(s.last_used_ms, s.id, self._seq, s) for s in self._sessions.values()]
            heapq.heapify(self._last_used)
            for s in self._sessions.values():
                s._lu_pushed = s.last_used_ms
        if len(self._by_priv) > limit or len(self._by_all) > limit:
            self._seq += 1
            live = list(self._sessions.values())
            self._by_priv = [(s.privileged, s.cached_size, s.id, self._seq, s) for s in live if s._in_priv]
            self._by_all = [(s.privileged, s.cached_size, s.id, self._seq, s) for s in live if s._in_all]
            heapq.heapify(self._by_priv)
            heapq.heapify(self._by_all)
            for s in live:
                s._size_pushed = s.cached_size


# ---------------------------------------------------------------------------------------------- sharded cache
class FetchSessionCache:
    """Kafka's FetchSessionCache: ``shards`` shards of ``max_slots // shards`` entries each.

    Sessions are placed round-robin by a counter that advances on every full-context response generation, and
    eviction only considers entries of the chosen shard. Kafka 3.8+ always has 8 (KafkaBroker's
    NumFetchSessionCacheShards, not a config), so ``shards=1`` is the pre-3.8 single cache: ids in [1, INT_MAX),
    and every session id, whatever its value, is looked up in it (no shard index, so no out-of-range error).
    ``rng`` supplies session ids (default: random.Random(0), deterministic).
    """

    def __init__(self, max_slots: int = DEFAULT_MAX_SLOTS, shards: int = DEFAULT_SHARDS,
                 eviction_ms: int = DEFAULT_EVICTION_MS, rng: random.Random | None = None,
                 max_events: int = DEFAULT_MAX_EVENTS, record_events: bool = True) -> None:
        if shards < 1:
            raise ValueError("a fetch session cache needs at least one shard")
        if max_slots < 0:
            raise ValueError("max_slots must be >= 0")
        self.eviction_ms = eviction_ms
        self.rng = rng if rng is not None else random.Random(0)
        self.session_id_range = MAX_INT // shards
        self.meter = EvictionMeter()
        self._events = _EventLog(max_events, record_events)
        self.shards = [FetchSessionCacheShard(max_slots // shards, eviction_ms, self.session_id_range, k,
                                              self.rng, self.meter, self._events) for k in range(shards)]
        # Kafka's counter is a JVM-wide static AtomicInteger (shared by every cache in the process); it is per
        # instance here so that several simulated brokers do not perturb each other's shard choice.
        self.counter = 0

    # -- shards
    def get_cache_shard(self, session_id: int) -> FetchSessionCacheShard:
        """The shard owning ``session_id`` (Java int division); SessionIdOutOfRange outside the shard list."""
        if len(self.shards) == 1:      # the pre-3.8 cache: one map, INT_MAX and negative ids simply miss
            return self.shards[0]
        q = abs(session_id) // self.session_id_range
        index = q if session_id >= 0 else -q
        if not 0 <= index < len(self.shards):
            raise SessionIdOutOfRange(session_id, len(self.shards))
        return self.shards[index]

    def get_next_cache_shard(self) -> FetchSessionCacheShard:
        """Round robin: toPositive(counter.getAndIncrement()) % shards, with 32-bit wrap-around."""
        counter = self.counter     # (to_positive and _wrap_int32 inlined: every full fetch comes here)
        shards = self.shards
        self.counter = counter + 1 if counter != MAX_INT else -MAX_INT - 1
        return shards[(counter & 0x7FFFFFFF) % len(shards)]

    # -- sessions
    def get(self, session_id: int) -> FetchSession | None:
        try:
            return self.get_cache_shard(session_id).get(session_id)
        except SessionIdOutOfRange:
            return None

    def remove(self, session_id: int, now_ms: int | None = None, reason: str = "removed") -> FetchSession | None:
        try:
            shard = self.get_cache_shard(session_id)
        except SessionIdOutOfRange:
            return None
        return shard.remove(session_id, now_ms, reason)

    def sessions(self) -> Iterator[FetchSession]:
        for shard in self.shards:
            yield from shard.sessions()

    # -- metrics and observability
    @property
    def size(self) -> int:
        return sum(s.size for s in self.shards)

    @property
    def total_partitions(self) -> int:
        return sum(s.total_partitions for s in self.shards)

    @property
    def evictions(self) -> int:
        return self.meter.count

    def metrics(self) -> dict[str, int]:
        """The three kafka.server:type=FetchSessionCache metrics. The eviction meter is given as its cumulative
        count (a Yammer meter's count; rates need a clock, which the engine does not have)."""
        return {
            "NumIncrementalFetchSessions": self.size,
            "NumIncrementalFetchPartitionsCached": self.total_partitions,
            "IncrementalFetchSessionEvictionsPerSec": self.meter.count,
        }

    def drain_events(self) -> list[SessionEvent]:
        """Every creation, eviction and removal since the last drain, in order."""
        return self._events.drain()
