"""What one exchange did to its broker's session cache, as the tracker records it for the shadow replay
(analysis.diagnosis.shadow)."""

from __future__ import annotations

from typing import NamedTuple

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
