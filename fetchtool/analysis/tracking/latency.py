"""A bounded, mergeable histogram of response times (milliseconds) with a known relative error.

Buckets grow geometrically by GAMMA (the DDSketch layout): bucket i holds values in (GAMMA^(i-1), GAMMA^i] ms and
reports 2*GAMMA^i/(GAMMA+1), which is within RELATIVE_ERROR (1%) of every value in it. A day of fetches between
1 us and 1 hour fits in at most ~1,100 buckets, so memory is bounded however large the capture; counts per bucket
are exact, so two parts (the Spark engine's per-broker passes) merge by adding counts and give the same
quantiles as one pass over everything.
"""

from __future__ import annotations

from math import ceil, log

GAMMA = 1.02
RELATIVE_ERROR = round((GAMMA - 1) / (GAMMA + 1), 4)  # 0.0099: said in the JSON and the docs as 1%
INV_LOG_GAMMA = 1 / log(GAMMA)
ZERO_BELOW_MS = 0.001  # under 1 us (or negative: clock steps between capture points) counts as 0
ZERO = -(2**31)  # the bucket of those


def bucket(ms: float) -> int:
    """The bucket of a response time in ms."""
    if ms < ZERO_BELOW_MS:
        return ZERO
    return ceil(log(ms) * INV_LOG_GAMMA)


def value(index: int) -> float:
    """The value a bucket reports (ms), within RELATIVE_ERROR of anything in it."""
    if index == ZERO:
        return 0.0
    return 2 * GAMMA**index / (GAMMA + 1)


class LatencySketch:
    """Counts per bucket; add() takes a bucket index (hot loops may update ``counts`` directly)."""

    __slots__ = ("counts",)

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}

    @property
    def n(self) -> int:
        return sum(self.counts.values())

    def add(self, index: int) -> None:
        counts = self.counts
        counts[index] = counts.get(index, 0) + 1

    def merge(self, other: LatencySketch) -> None:
        counts = self.counts
        for i, c in other.counts.items():
            counts[i] = counts.get(i, 0) + c

    def quantile(self, q: float) -> float | None:
        """The q-quantile (nearest rank: the smallest value with at least q of the values at or below it)."""
        n = self.n
        if not n:
            return None
        rank = max(1, ceil(q * n))
        seen = 0
        for i in sorted(self.counts):
            seen += self.counts[i]
            if seen >= rank:
                return value(i)
        return None  # not reached

    def to_json(self) -> dict:
        """{"responses", "p50", "p99", "relative_error"}: times in ms, rounded to the microsecond."""
        return {"responses": self.n, "p50": _ms(self.quantile(0.5)), "p99": _ms(self.quantile(0.99)),
                "relative_error": RELATIVE_ERROR}  # fmt: skip


def _ms(v: float | None) -> float | None:
    return None if v is None else round(v, 3)
