"""Counters shared by simulate and replay: the TOTALS object of the design.md JSON contracts.

Also the captured side of every comparison: what the capture itself shows, per broker and per client stream,
counted the same way (sessions created, inferred evictions, errors, incremental share, bytes).
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import overload

from fetchtool.replay.plan import ReplayPlan

FETCH_SESSION_ID_NOT_FOUND = 70


@dataclass(slots=True)
class Tally:
    requests: int = 0
    responses: int = 0
    sessions_created: int = 0
    evictions: int = 0  # simulate: sessions of this scope evicted; captured: inferred from 70 on a live session
    errors: Counter = field(default_factory=Counter)  # top-level error code -> count
    incremental: int = 0  # requests answered as incremental (error NONE)
    request_bytes: int = 0
    response_bytes: int = 0
    records_bytes: int = 0

    def add(self, other: Tally) -> None:
        self.requests += other.requests
        self.responses += other.responses
        self.sessions_created += other.sessions_created
        self.evictions += other.evictions
        self.errors.update(other.errors)
        self.incremental += other.incremental
        self.request_bytes += other.request_bytes
        self.response_bytes += other.response_bytes
        self.records_bytes += other.records_bytes

    @property
    def incremental_share(self) -> float:
        return self.incremental / self.requests if self.requests else 0.0

    def to_json(self) -> dict:
        return {
            "requests": self.requests,
            "responses": self.responses,
            "sessions_created": self.sessions_created,
            "evictions": self.evictions,
            "errors": {str(code): n for code, n in sorted(self.errors.items()) if n},
            "incremental_share": round(self.incremental_share, 4),
            "request_bytes": self.request_bytes,
            "response_bytes": self.response_bytes,
            "records_bytes": self.records_bytes,
        }


_COUNTS = ("requests", "responses", "sessions_created", "evictions", "incremental", "request_bytes",
           "response_bytes", "records_bytes")   # every Tally field but errors
_COUNTS_OF = attrgetter(*_COUNTS)
_WIDER = {"b": "h", "h": "i", "i": "q"}     # array type codes: int8, int16, int32, int64


def _column(streams: int) -> array:
    """A packed column of one counter per stream, all zero: one byte a stream until a value needs more (_store)."""
    return array("b", bytes(streams))


def _store(columns: dict[str, array], name: str, i: int, value: int) -> None:
    """columns[name][i] = value, widening the column (int8, int16, int32, int64) when the value does not fit."""
    column = columns[name]
    while True:
        try:
            column[i] = value
            break
        except OverflowError:
            column = array(_WIDER[column.typecode], column)   # (KeyError beyond int64)
    columns[name] = column


def _added(a: array, b: array) -> array:
    """The element-wise sum of two columns, in the narrower type that holds it."""
    values = list(map(int.__add__, a, b))
    code: str = a.typecode if a.itemsize >= b.itemsize else b.typecode
    while True:
        try:
            return array(code, values)
        except OverflowError:
            code = _WIDER[code]


class StreamTallies(Sequence[Tally]):
    """One Tally per stream, packed: an array per counter, and error counts only for streams that had errors.

    A storm's simulation has a tally for each of 100,000s of streams in every configuration; as Tally objects (with
    an empty Counter each) they took about 200 bytes a stream, packed 8 to 20 (each column one byte a stream until
    a value needs 2, 4 or 8). Indexing gives a Tally made from the columns (a copy: changing it changes nothing
    here); ``add_to`` changes one counter of a packed stream.
    """

    __slots__ = ("_columns", "_errors")

    def __init__(self, streams: int) -> None:
        self._columns = {name: _column(streams) for name in _COUNTS}
        self._errors: dict[int, Counter] = {}

    def put(self, i: int, tally: Tally) -> None:
        """Store stream ``i``'s tally (its counters replace what was stored)."""
        columns = self._columns
        for name, value in zip(_COUNTS, _COUNTS_OF(tally)):
            try:
                columns[name][i] = value
            except OverflowError:
                _store(columns, name, i, value)
        if tally.errors:
            self._errors[i] = Counter(tally.errors)    # (a copy: merge adds to it)
        else:
            self._errors.pop(i, None)

    def add_to(self, i: int, name: str, n: int) -> None:
        _store(self._columns, name, i, self._columns[name][i] + n)

    def merge(self, other: StreamTallies) -> None:
        """Add ``other``'s counters stream by stream (simulate merges the tallies of disjoint sets of streams)."""
        for name in _COUNTS:
            self._columns[name] = _added(self._columns[name], other._columns[name])
        for i, errors in other._errors.items():
            mine = self._errors.get(i)
            if mine is None:
                self._errors[i] = Counter(errors)
            else:
                mine.update(errors)

    def totals_by(self, groups: list[str]) -> tuple[Tally, dict[str, Tally]]:
        """The sum of every stream's tally, and the sums by group (``groups``: each stream's, by index), summed
        column by column rather than through a Tally per stream."""
        members: dict[str, list[int]] = {}
        for i, group in enumerate(groups):
            members.setdefault(group, []).append(i)
        totals = Tally()
        out: dict[str, Tally] = {}
        for group, indices in members.items():
            tally = out[group] = Tally()
            for name, column in self._columns.items():
                setattr(tally, name, sum(map(column.__getitem__, indices)))
        for i, errors in self._errors.items():
            out[groups[i]].errors.update(errors)
        for tally in out.values():
            totals.add(tally)
        return totals, out

    def __len__(self) -> int:
        return len(self._columns["requests"])

    @overload
    def __getitem__(self, i: int) -> Tally: ...

    @overload
    def __getitem__(self, i: slice) -> list[Tally]: ...

    def __getitem__(self, i: int | slice) -> Tally | list[Tally]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        c = self._columns
        errors = self._errors.get(i if i >= 0 else i + len(self))
        return Tally(c["requests"][i], c["responses"][i], c["sessions_created"][i], c["evictions"][i],
                     Counter() if errors is None else Counter(errors), c["incremental"][i], c["request_bytes"][i],
                     c["response_bytes"][i], c["records_bytes"][i])

    def __iter__(self) -> Iterator[Tally]:
        for i in range(len(self)):
            yield self[i]


class StreamCounts(Mapping[int, int]):
    """A count per stream index, packed (one byte a stream until a count needs more), read like the Counter it
    replaces: the streams with a non-zero count are its keys, and indexing a stream without one gives 0.
    simulate's evictions caused."""

    __slots__ = ("_columns",)

    def __init__(self, streams: int) -> None:
        self._columns = {"n": _column(streams)}

    def add(self, i: int, n: int = 1) -> None:
        _store(self._columns, "n", i, self._columns["n"][i] + n)

    def merge(self, other: StreamCounts) -> None:
        self._columns["n"] = _added(self._columns["n"], other._columns["n"])

    def __getitem__(self, i: int) -> int:
        counts = self._columns["n"]
        return counts[i] if 0 <= i < len(counts) else 0

    def __contains__(self, i: object) -> bool:
        return isinstance(i, int) and self[i] != 0

    def __iter__(self) -> Iterator[int]:
        return (i for i, n in enumerate(self._columns["n"]) if n)

    def __len__(self) -> int:
        return sum(1 for n in self._columns["n"] if n)


@dataclass(slots=True)
class CapturedCounts:
    totals: Tally
    brokers: dict[str, Tally]
    streams: StreamTallies  # by stream index


def totals_by_broker(plan: ReplayPlan, streams: Sequence[Tally]) -> tuple[Tally, dict[str, Tally]]:
    """The sum of every stream's tally, and the sums per broker (``streams`` by stream index)."""
    if isinstance(streams, StreamTallies):
        return streams.totals_by([s.broker for s in plan.streams])
    totals = Tally()
    brokers: dict[str, Tally] = {}
    for stream, tally in zip(plan.streams, streams):
        brokers.setdefault(stream.broker, Tally()).add(tally)
        totals.add(tally)
    return totals, brokers


def captured_counts(plan: ReplayPlan) -> CapturedCounts:
    """What the capture shows, counted like the simulation counts."""
    streams = StreamTallies(len(plan.streams))
    live: set[tuple[str, int]] = set()  # (broker, session id) seen created or used successfully
    evicted: set[tuple[str, int]] = set()
    for n, stream in enumerate(plan.streams):
        t = Tally()
        for f in stream.fetches:
            t.requests += 1
            t.request_bytes += f.request_bytes or 0
            if f.error_code is None:
                continue
            t.responses += 1
            t.response_bytes += f.response_bytes or 0
            t.records_bytes += f.records_bytes or 0
            if f.error_code:
                t.errors[f.error_code] += 1
            key = (stream.broker, f.session_id)
            if f.error_code == FETCH_SESSION_ID_NOT_FOUND and f.incremental and key in live and key not in evicted:
                evicted.add(key)
                t.evictions += 1  # charged to the client whose session vanished
            if f.error_code == 0:
                if f.epoch == 0 and f.response_session_id:
                    t.sessions_created += 1
                    live.add((stream.broker, f.response_session_id))
                elif f.incremental:
                    t.incremental += 1
                    live.add(key)
        streams.put(n, t)
    return CapturedCounts(*totals_by_broker(plan, streams), streams)
