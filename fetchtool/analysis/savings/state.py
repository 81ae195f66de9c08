"""The savings model's per-partition state, and the cheap ways it builds engine inputs (see savings_model).

A big capture feeds the model hundreds of thousands of partition rows, so the per-row work is kept to C-level
passes: state is reached through objects held by the key entries (no Python-level __hash__ of the engine's
TopicIdPartition per row), engine inputs are made by fetchtool._fast's constructors, and the row fields are
read with attrgetter/itemgetter.
"""

from __future__ import annotations

import uuid
from operator import attrgetter
from typing import NamedTuple

from fetchtool._fast import fast_constructor
from fetchtool.exchange import RequestPartition, ResponsePartition
from fetchtool.sessions import PartitionData, PartitionResult, TopicIdPartition
from fetchtool.sessions.partitions import ZERO_UUID

QUIET = PartitionResult()   # a partition never seen: equal to a new cached partition's state, so not included


class ClientKey(NamedTuple):
    """The client's session key. Same equality as the engine's TopicPartition (topic, partition); a tuple so
    that hashing it, millions of times on a big capture, costs no Python call."""

    topic: str
    partition: int


class PartitionState:
    """The model's state for one partition of a stream: one object per engine key (TopicIdPartition equality),
    so it stands for the dicts keyed by the engine key that the model would otherwise hash into several times
    per row."""

    __slots__ = ("ck", "resp_row", "result", "noisy")

    def __init__(self, ck: ClientKey) -> None:
        self.ck = ck                  # the first client key seen for it (the only one while the stream is simple)
        self.resp_row: ResponsePartition | None = None   # the captured row `result` was made from
        self.result: PartitionResult = QUIET            # the last values seen (never seen: a new partition's)
        self.noisy = False            # the result has records, errors, ...: not to be repeated


class RequestState:
    """The last request row of one client key, and the engine input made from it (reused while unchanged, so
    the session engine sees the very same object, and skips it)."""

    __slots__ = ("row", "data")

    def __init__(self) -> None:
        self.row: RequestPartition | None = None
        self.data: PartitionData | None = None


class EngineKey(TopicIdPartition):
    """The engine's key as this model hands it over, carrying its client key, so the engine's output (which holds
    the keys it was given) maps back to the client's keys without hashing a TopicIdPartition (a Python-level
    __hash__). Immutable, so the models of one estimator share one per captured (topic, topic id, partition)
    (KeyDirectory). Equality and hash are the engine's."""

    __slots__ = ("ck",)

    def __reduce__(self):   # pickled with its client key (the Spark engine ships estimators between processes)
        return make_key, (self.topic_id, self.topic, self.partition, self.ck)


def make_key(topic_id: uuid.UUID, topic: str, partition: int, ck: ClientKey) -> EngineKey:
    k = EngineKey(topic_id, topic, partition)
    object.__setattr__(k, "ck", ck)
    return k


class KeyDirectory(dict):
    """(topic, topic id, partition) of a captured row -> (that tuple, its ClientKey, its EngineKey), shared by the
    models of one estimator: a session storm's 100,000 connections fetch the same few partitions, and each would
    otherwise make (and later free) its own keys. Bounded: past LIMIT entries, further keys are made per model."""

    __slots__ = ()
    LIMIT = 100_000

    def keys_of(self, k: tuple, topic: str | None, topic_id: str | None, partition: int, ids: bool
                ) -> tuple[tuple, ClientKey, EngineKey]:
        """The shared keys of row key ``k`` (= (topic, topic_id if ids else None, partition))."""
        known = self.get(k)
        if known is None:
            tid = uuid.UUID(topic_id) if ids and topic_id else ZERO_UUID
            # The client keys its session by name; a v13+ capture may only show the id.
            name = topic if topic is not None else (topic_id or "")
            ck = tuple.__new__(ClientKey, (name, partition))
            known = (k, ck, make_key(tid, name, partition, ck))
            # (a name-less row below v13 is named by its topic id, which ``k`` leaves out: not shared)
            if (topic is not None or ids) and len(self) < self.LIMIT:
                self[k] = known
        return known


_result = fast_constructor(PartitionResult)
_RESULT_FIELDS = attrgetter("error_code", "high_watermark", "last_stable_offset", "log_start_offset", "records_bytes",
                            "diverging_epoch", "preferred_read_replica")


def result_from_row(row: ResponsePartition) -> PartitionResult:
    """What the broker read for a partition, as a captured response row shows it."""
    return _result(*_RESULT_FIELDS(row))


result = _result  # positional, in PartitionResult's field order
partition_data = fast_constructor(PartitionData)  # positional, in PartitionData's field order
