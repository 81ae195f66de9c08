"""The savings model's per-partition state, and the cheap ways it builds engine inputs (see savings_model).

A big capture feeds the model hundreds of thousands of partition rows, so the per-row work is kept to C-level
passes: state is reached through objects held by the key entries (no Python-level __hash__ of the engine's
TopicIdPartition per row), engine inputs are made without the frozen dataclasses' __init__, and the row fields
are read with attrgetter/itemgetter.
"""

from __future__ import annotations

import dataclasses
import uuid
from operator import attrgetter
from typing import NamedTuple

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


def fast_constructor(cls, names: tuple[str, ...], sample: tuple, row_fields: tuple[str, ...] | None = None):
    """A constructor for a frozen slotted dataclass, three times cheaper than its __init__ (one object is made
    per changed captured row): the slots are filled on a mutable twin with the same layout, whose instance
    then becomes a `cls` (Python allows the __class__ change between such twins). The object is the one
    __init__ makes: checked here on `sample` (positional arguments), else the plain constructor is used.

    Positional, or with `row_fields` from one captured ResponsePartition: the row field for each of `names`.
    """
    if row_fields is None:
        plain, args, values = cls, [f"a{i}" for i in range(len(names))], [f"a{i}" for i in range(len(names))]
        check = sample
    else:
        get = attrgetter(*row_fields)
        plain, args = (lambda r: cls(*get(r))), ["row"]
        values = [f"row[{ResponsePartition._fields.index(f)}]" for f in row_fields]
        by_field = dict(zip(row_fields, sample))
        check = (ResponsePartition._make(by_field.get(f, 0) for f in ResponsePartition._fields),)
    fields = tuple(f.name for f in dataclasses.fields(cls))
    if fields != names or getattr(cls, "__slots__", None) != names or hasattr(cls, "__post_init__"):
        return plain
    twin = type(f"_Mutable{cls.__name__}", (), {"__slots__": names})
    body = "".join(f"    o.{n} = {v}\n" for n, v in zip(names, values))
    namespace = {"twin": twin, "cls": cls}
    exec(f"def make({', '.join(args)}):\n    o = twin()\n{body}    o.__class__ = cls\n    return o\n",  # noqa: S102
         namespace)
    make = namespace["make"]
    try:
        made = make(*check)
    except TypeError:   # the layouts differ after all
        return plain
    return make if type(made) is cls and made == cls(*sample) else plain


result_from_row = fast_constructor(
    PartitionResult, ("error_code", "high_watermark", "last_stable_offset", "log_start_offset", "records_size",
                      "diverging_epoch", "preferred_read_replica"), (1, 2, 3, 4, 5, 6, 7),
    ("error_code", "high_watermark", "last_stable_offset", "log_start_offset", "records_bytes", "diverging_epoch",
     "preferred_read_replica"))
result = fast_constructor(PartitionResult, ("error_code", "high_watermark", "last_stable_offset", "log_start_offset",
                                          "records_size", "diverging_epoch", "preferred_read_replica"),
                          (1, 2, 3, 4, 5, 6, 7))
partition_data = fast_constructor(PartitionData, ("fetch_offset", "log_start_offset", "max_bytes",
                                               "current_leader_epoch", "last_fetched_epoch", "topic_id"),
                               (1, 2, 3, 4, 5, uuid.UUID(int=6)))
