"""Fetch traffic over time, per broker: fetches, errors and response times in fixed time buckets.

Bounded and engine-independent. Buckets lie on a grid fixed in absolute time: bucket i of width w covers
[i*w, (i+1)*w) seconds since the epoch, with w a power of two (exact in binary floating point, so floor(ts / w)
is exact and halving the index is exactly the bucket of width 2w). The width starts at FINEST_S and doubles
whenever the buckets spanned would exceed MAX_BUCKETS, so the final width is the finest that holds every
timestamp seen, whatever order they came in; counts add up and latency sketches merge. The Spark engine's
per-broker part is therefore equal to the one-pass result, with no need to know the capture's span up front.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil, floor, log
from operator import itemgetter

from fetchtool.exchange import FETCH, Exchange

from fetchtool.analysis.tracking.latency import INV_LOG_GAMMA, ZERO, ZERO_BELOW_MS, LatencySketch

_error = itemgetter(3)  # ResponsePartition.error_code

MAX_BUCKETS = 512
FINEST_S = 2.0**-5  # 31.25 ms: finer than any MaxWait worth looking at, and a short capture still gets many buckets


class _Bucket:
    __slots__ = ("fetches", "errors", "partition_errors", "latency")

    def __init__(self) -> None:
        self.fetches = 0
        self.errors = 0  # responses with a top-level error
        self.partition_errors = 0  # responses with at least one partition error
        self.latency = LatencySketch()

    def merge(self, other: _Bucket) -> None:
        self.fetches += other.fetches
        self.errors += other.errors
        self.partition_errors += other.partition_errors
        self.latency.merge(other.latency)


@dataclass(frozen=True, slots=True)
class Timeline:
    """One broker's series: bucket i starts at ``start + i * bucket_s`` (epoch seconds); every bucket between the
    first and the last fetch is listed, empty ones with zero fetches and no response times."""

    bucket_s: float
    start: float
    fetches: tuple[int, ...]
    errors: tuple[int, ...]
    partition_errors: tuple[int, ...]
    p50_ms: tuple[float | None, ...]
    p99_ms: tuple[float | None, ...]

    def to_json(self) -> dict:
        return {"bucket_s": self.bucket_s, "start": self.start, "fetches": list(self.fetches),
                "errors": list(self.errors), "partition_errors": list(self.partition_errors),
                "p50_ms": list(self.p50_ms), "p99_ms": list(self.p99_ms)}  # fmt: skip


class TimelineTracker:
    """Feed Fetch exchanges of one broker (or of many: one series per broker); read timelines at the end."""

    def __init__(self) -> None:
        self.series: dict[str, _Series] = {}

    def feed(self, ex: Exchange) -> None:
        if ex.api_key != FETCH or ex.ts is None:
            return
        s = self.series.get(ex.broker)
        if s is None:
            s = self.series[ex.broker] = _Series(ex.ts)
        s.feed(ex, ex.ts)

    def timelines(self) -> dict[str, Timeline]:
        return {broker: s.timeline() for broker, s in self.series.items()}


class _Series:
    __slots__ = ("width", "buckets", "lo", "hi")

    def __init__(self, first_ts: float) -> None:
        self.width = FINEST_S
        self.buckets: dict[int, _Bucket] = {}
        self.lo = self.hi = floor(first_ts / FINEST_S)  # made for its first exchange, so never empty

    def feed(self, ex: Exchange, ts: float) -> None:
        """``ts``: ex.ts, known (exchanges without a request time are not in a timeline)."""
        i = floor(ts / self.width)
        if i < self.lo or i > self.hi:
            self.lo, self.hi = min(self.lo, i), max(self.hi, i)
            while self.hi - self.lo + 1 > MAX_BUCKETS:
                self._coarsen()
            i = floor(ts / self.width)
        b = self.buckets.get(i)
        if b is None:
            b = self.buckets[i] = _Bucket()
        b.fetches += 1
        rp = ex.response_partitions
        if ex.response_ts is None or rp is None:
            return  # no response captured
        if ex.error_code:
            b.errors += 1
        if rp and any(map(_error, rp)):
            b.partition_errors += 1
        ms = (ex.response_ts - ts) * 1000.0
        b.latency.add(ceil(log(ms) * INV_LOG_GAMMA) if ms >= ZERO_BELOW_MS else ZERO)  # latency.bucket, inlined

    def _coarsen(self) -> None:
        """Double the width: bucket i becomes i // 2 (exact: the width is a power of two)."""
        self.width *= 2
        coarse: dict[int, _Bucket] = {}
        for i, b in self.buckets.items():
            c = coarse.get(i // 2)
            if c is None:
                coarse[i // 2] = b
            else:
                c.merge(b)
        self.buckets = coarse
        self.lo //= 2
        self.hi //= 2

    def timeline(self) -> Timeline:
        rows = [self.buckets.get(i) for i in range(self.lo, self.hi + 1)]
        return Timeline(
            bucket_s=self.width, start=self.lo * self.width,
            fetches=tuple(b.fetches if b else 0 for b in rows), errors=tuple(b.errors if b else 0 for b in rows),
            partition_errors=tuple(b.partition_errors if b else 0 for b in rows),
            p50_ms=tuple(_ms(b.latency.quantile(0.5)) if b else None for b in rows),
            p99_ms=tuple(_ms(b.latency.quantile(0.99)) if b else None for b in rows),
        )  # fmt: skip


def _ms(v: float | None) -> float | None:
    return None if v is None else round(v, 3)
