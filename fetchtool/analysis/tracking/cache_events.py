"""What one exchange did to its broker's session cache, as the tracker records it for the shadow replay
(analysis.diagnosis.shadow)."""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from typing import NamedTuple

from fetchtool.analysis.tracking.int_columns import append_int, int_column

# Event kinds, in the order Kafka handles things that happen in the same millisecond.
# RESTART: the broker was lost with its whole cache (analysis.connections).
RESTART, CLOSE, ABSENT, PRESENT, TOUCH, CREATE, REFUSE = range(7)


class CacheEvent(NamedTuple):
    """What one exchange did to a broker's cache. ``key``: the tracked session (None for a refusal).
    A NamedTuple, not a dataclass: one is made per exchange, and a tuple is the cheapest immutable record."""

    t_ms: int
    kind: int
    seq: int
    session_id: int
    size: int
    privileged: bool
    key: object = None  # the analysis' own session object, returned in fates


class CacheLog:
    """A broker's CacheEvents, recorded in columns: a session storm records one or two per session, and a
    CacheEvent with its numbers costs about 200 bytes, a row of these arrays about 30. Iterating gives the
    events as CacheEvents, in the order recorded (``seq``); ``ordered()`` in the order the replay needs."""

    __slots__ = ("t_ms", "kinds", "session_ids", "sizes", "privileged", "keys")

    def __init__(self) -> None:
        self.t_ms = int_column()
        self.kinds = bytearray()
        self.session_ids = int_column()
        self.sizes = int_column()
        self.privileged = bytearray()
        self.keys: list = []

    def append(self, t_ms: int, kind: int, session_id: int, size: int, privileged: bool, key=None) -> None:
        self.t_ms = append_int(self.t_ms, t_ms)
        self.session_ids = append_int(self.session_ids, session_id)
        self.sizes = append_int(self.sizes, size)
        self.kinds.append(kind)
        self.privileged.append(bool(privileged))
        self.keys.append(key)

    def __len__(self) -> int:
        return len(self.keys)

    def event(self, i: int) -> CacheEvent:
        return CacheEvent(self.t_ms[i], self.kinds[i], i, self.session_ids[i], self.sizes[i],
                          bool(self.privileged[i]), self.keys[i])

    def __iter__(self) -> Iterator[CacheEvent]:
        return map(self.event, range(len(self.keys)))

    def ordered(self) -> Ordered:
        """The events by (t_ms, kind, seq), re-iterable, made one at a time as they are read."""
        t, k = self.t_ms, self.kinds
        return Ordered(self, array("q", sorted(range(len(self.keys)), key=lambda i: (t[i], k[i]))))


class Ordered:
    """CacheLog.ordered(): the log's events in a given order, each made when it is read."""

    __slots__ = ("log", "order")

    def __init__(self, log: CacheLog, order: array) -> None:
        self.log, self.order = log, order

    def __len__(self) -> int:
        return len(self.order)

    def __iter__(self) -> Iterator[CacheEvent]:
        return map(self.log.event, self.order)
