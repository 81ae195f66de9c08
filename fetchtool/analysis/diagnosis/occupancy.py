"""A broker's session cache occupancy over time, as the shadow replay (analysis.diagnosis.shadow) shows it.

The recorder notes each shard's size after every cache event that changed it; the series are step functions
(the value holds until the next point). Bounded: a series longer than MAX_POINTS is thinned to the highest and
the last point of each of MAX_POINTS / 2 equal time slices, so a peak (the broker's max_live_sessions) is never
thinned away.
"""

from __future__ import annotations

from dataclasses import dataclass

from fetchtool.analysis.tracking.int_columns import append_int, int_column

MAX_POINTS = 2000


@dataclass(frozen=True, slots=True)
class Series:
    """Live sessions (``live``) from each time (``t_ms``, broker time in ms since the epoch) to the next."""

    t_ms: tuple[int, ...]
    live: tuple[int, ...]

    def to_json(self) -> dict:
        return {"t_ms": list(self.t_ms), "live": list(self.live)}


@dataclass(frozen=True, slots=True)
class Occupancy:
    """The replayed cache's shape and its live sessions over time, in all and per shard (sharded caches only:
    shards that never held a session are left out)."""

    shards: int
    slots_per_shard: int | None  # None: more than the capture ever shows
    total: Series
    per_shard: tuple[tuple[int, Series], ...]  # (shard number, series)

    def to_json(self) -> dict:
        return {"shards": self.shards, "slots_per_shard": self.slots_per_shard, "total": self.total.to_json(),
                "per_shard": [{"shard": k, **s.to_json()} for k, s in self.per_shard]}  # fmt: skip


class OccupancyRecorder:
    """The points of each series in columns (a storm's replay notes one or two per event: as tuples they were
    about 110 bytes each, here 16)."""

    __slots__ = ("sizes", "points", "total")

    def __init__(self, shards: int) -> None:
        self.sizes = [0] * shards
        self.points: list[_Points] = [_Points() for _ in range(shards)]
        self.total = _Points()

    def note(self, t_ms: int, shards) -> None:
        """After an event at ``t_ms``: record the shards (FetchSessionCacheShard) whose size changed."""
        changed = False
        sizes = self.sizes
        for k, shard in enumerate(shards):
            n = shard.size
            if n != sizes[k]:
                sizes[k] = n
                self.points[k].add(t_ms, n)
                changed = True
        if changed:
            self.total.add(t_ms, sum(sizes))

    def result(self, shape) -> Occupancy:
        per_shard: tuple[tuple[int, Series], ...] = ()
        if len(self.points) > 1:
            per_shard = tuple((k, p.series()) for k, p in enumerate(self.points) if p.t_ms)
        return Occupancy(shape.shards, shape.per_shard, self.total.series(), per_shard)


class _Points:
    """One series' points: times and values in two arrays (a list, should a time not fit 64 bits)."""

    __slots__ = ("t_ms", "live")

    def __init__(self) -> None:
        self.t_ms = int_column()
        self.live = int_column()

    def add(self, t_ms: int, n: int) -> None:
        self.t_ms = append_int(self.t_ms, t_ms)
        self.live.append(n)

    def series(self) -> Series:
        """The series, thinned as thin() does."""
        ts, ns = self.t_ms, self.live
        if len(ts) > MAX_POINTS:
            chosen = _thinned(ts, ns, MAX_POINTS)
            return Series(tuple(ts[i] for i in chosen), tuple(ns[i] for i in chosen))
        return Series(tuple(ts), tuple(ns))


def thin(points: list[tuple[int, int]], limit: int = MAX_POINTS) -> list[tuple[int, int]]:
    """At most ``limit`` points: per time slice, its highest (first of equals) and its last point, in order."""
    if len(points) <= limit:
        return points
    return [points[i] for i in _thinned([t for t, _ in points], [n for _, n in points], limit)]


def _thinned(ts, ns, limit: int) -> list[int]:
    """thin() on columns: the indexes of the points kept."""
    slices = limit // 2
    t0, t1 = ts[0], ts[-1]
    span = max(t1 - t0, 1)
    keep: dict[int, tuple[int, int]] = {}  # slice -> (index of the highest, index of the last)
    for i, t in enumerate(ts):
        n = ns[i]
        s = min((t - t0) * slices // span, slices - 1)
        kept = keep.get(s)
        if kept is None:
            keep[s] = (i, i)
        else:
            top = kept[0] if ns[kept[0]] >= n else i
            keep[s] = (top, i)
    return sorted({i for pair in keep.values() for i in pair})
