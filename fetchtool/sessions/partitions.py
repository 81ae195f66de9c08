"""Partition identities and the per-partition data a request carries and a broker read produces."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import NamedTuple

ZERO_UUID = uuid.UUID(int=0)

_set = object.__setattr__   # see metadata.py: the hot frozen classes assign their fields with a pre-bound setter


@dataclass(frozen=True, slots=True, eq=False)
class TopicIdPartition:
    """The broker's session key, with Kafka's ``CachedPartition`` equality.

    Equal by (topic_id, partition) when topic_id is non-zero (v13+: the name may still be unknown, None),
    otherwise by (topic, partition) (v12 and older: every id is zero). Kafka's own equals is asymmetric for a
    zero-id vs non-zero-id pair; with different hashes such a pair never meets in a map, so a symmetric key is
    equivalent. The key is computed once because sessions look partitions up on every request.
    """

    topic_id: uuid.UUID
    topic: str | None
    partition: int
    _key: tuple = field(init=False, repr=False, compare=False)
    _hash: int = field(init=False, repr=False, compare=False)

    def __init__(self, topic_id: uuid.UUID, topic: str | None, partition: int) -> None:
        _set(self, "topic_id", topic_id)
        _set(self, "topic", topic)
        _set(self, "partition", partition)
        tid = topic_id.int
        key = (tid, partition) if tid else (topic, partition)
        _set(self, "_key", key)
        _set(self, "_hash", hash(key))

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if isinstance(other, TopicIdPartition):
            return self._key == other._key
        return NotImplemented

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        return f"{self.topic_id}:{self.topic}-{self.partition}"


class TopicPartition(NamedTuple):
    """The client's key (FetchSessionHandler keys its session by name).

    A NamedTuple rather than a dataclass so that hashing and equality run in C: the client's session map is
    looked up once per partition on every request. Equal by (topic, partition), as Kafka's TopicPartition.
    """

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class PartitionData:
    """What a Fetch request says about one partition (FetchRequest.PartitionData). -1 means "absent"."""

    fetch_offset: int
    log_start_offset: int = -1
    max_bytes: int = 1048576
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    topic_id: uuid.UUID = ZERO_UUID

    def __init__(self, fetch_offset: int, log_start_offset: int = -1, max_bytes: int = 1048576,
                 current_leader_epoch: int = -1, last_fetched_epoch: int = -1, topic_id: uuid.UUID = ZERO_UUID
                 ) -> None:
        _set(self, "fetch_offset", fetch_offset)
        _set(self, "log_start_offset", log_start_offset)
        _set(self, "max_bytes", max_bytes)
        _set(self, "current_leader_epoch", current_leader_epoch)
        _set(self, "last_fetched_epoch", last_fetched_epoch)
        _set(self, "topic_id", topic_id)


@dataclass(frozen=True, slots=True)
class PartitionResult:
    """What the broker read for one partition: the input a context turns into a response.

    ``records_size`` is the byte size of the Records blob (FetchResponse.recordsSize); -1 in
    ``diverging_epoch`` / ``preferred_read_replica`` means the field is absent.
    """

    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records_size: int = 0
    diverging_epoch: int = -1
    preferred_read_replica: int = -1

    def __init__(self, error_code: int = 0, high_watermark: int = -1, last_stable_offset: int = -1,
                 log_start_offset: int = -1, records_size: int = 0, diverging_epoch: int = -1,
                 preferred_read_replica: int = -1) -> None:
        _set(self, "error_code", error_code)
        _set(self, "high_watermark", high_watermark)
        _set(self, "last_stable_offset", last_stable_offset)
        _set(self, "log_start_offset", log_start_offset)
        _set(self, "records_size", records_size)
        _set(self, "diverging_epoch", diverging_epoch)
        _set(self, "preferred_read_replica", preferred_read_replica)


class ReadResults(dict):
    """Partition results (TopicIdPartition -> PartitionResult) that say what changed since an earlier mapping.

    ``since`` is the ReadResults these were derived from (or None); ``changed`` lists the keys, in this mapping's
    order, whose result is not the very object ``since`` holds for them (or which ``since`` lacks), each followed
    by its result: (key, result, key, result, ...), so that reading them needs no hashing. Every other key maps to
    the identical object. An incremental context whose session last answered from ``since`` then visits only the
    changed partitions, instead of walking every partition of the session as Kafka's PartitionIterator does; the
    response and the session are the same either way (tests/sessions/test_changed_partitions_property.py).

    A ReadResults is not changed once made (the engine relies on ``since`` still holding what it answered from).
    It keeps ``since`` alive: a caller that derives a long chain should drop ``since`` from the older ones.
    """

    __slots__ = ("since", "changed")

    def __init__(self, items=(), since: ReadResults | None = None, changed: tuple = ()) -> None:
        super().__init__(items)
        self.since = since
        self.changed = changed

    @classmethod
    def derive(cls, since: ReadResults | None, items) -> ReadResults:
        """The results ``items`` (pairs or a mapping), with ``changed`` worked out against ``since``."""
        out = cls(items, since)
        out.settle()
        return out

    def settle(self) -> None:
        """Work out ``changed`` against ``since``, once the mapping is complete (a key set twice while it was
        filled is listed once, with the result it kept)."""
        get = self.since.get if self.since is not None else {}.get
        changed: list = []
        for k, v in self.items():
            if get(k) is not v:
                changed += (k, v)
        self.changed = tuple(changed)
