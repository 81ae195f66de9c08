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
    """The engine's key as this model hands it over. It carries its client key and its PartitionState, so the
    engine's output (which holds the keys it was given) maps back to the model's state without hashing a
    TopicIdPartition (a Python-level __hash__). Equality and hash are the engine's."""

    __slots__ = ("ck", "part")

    def __reduce__(self):   # pickled with its state (the Spark engine ships estimators between processes)
        return make_key, (self.topic_id, self.topic, self.partition, self.ck, self.part)


def make_key(topic_id: uuid.UUID, topic: str, partition: int, ck: ClientKey, part: PartitionState) -> EngineKey:
    k = EngineKey(topic_id, topic, partition)
    object.__setattr__(k, "ck", ck)
    object.__setattr__(k, "part", part)
    return k


_result = fast_constructor(PartitionResult)
_RESULT_FIELDS = attrgetter("error_code", "high_watermark", "last_stable_offset", "log_start_offset", "records_bytes",
                            "diverging_epoch", "preferred_read_replica")


def result_from_row(row: ResponsePartition) -> PartitionResult:
    """What the broker read for a partition, as a captured response row shows it."""
    return _result(*_RESULT_FIELDS(row))


result = _result  # positional, in PartitionResult's field order
partition_data = fast_constructor(PartitionData)  # positional, in PartitionData's field order
