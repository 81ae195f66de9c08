"""The shadow cache (fetchtool.analysis.diagnosis.shadow) on its own: a broker's cache events in, the shapes the capture
allows and the evictions they all agree on out."""

from __future__ import annotations

from fetchtool.analysis.diagnosis.shadow import infer
from fetchtool.analysis.tracking.cache_events import ABSENT, CREATE, REFUSE, TOUCH, CacheEvent

SHARD = 2147483647 // 8
S = 1000  # ms


def ev(t_s: float, kind: int, sid: int = 0, size: int = 1, key=None) -> CacheEvent:
    return CacheEvent(int(t_s * S), kind, 0, sid, size, False, key if key is not None else sid)


def test_nothing_bounds_the_cache_without_a_refusal_or_an_unexplained_70():
    v = infer([ev(0, CREATE, 1), ev(1, CREATE, SHARD + 1)], None, None, evidence=False)
    assert [s.slots for s in v.shapes] == [None] and v.peak == 2 and not v.evictions


def test_a_refusal_proves_every_shard_could_be_full_and_pins_the_size():
    # one session per shard, then a refused newcomer: 8 slots fit, in 8 shards of 1 or in one cache of 8
    events = [ev(n, CREATE, n * SHARD + 1) for n in range(8)] + [ev(10, REFUSE)]
    v = infer(events, None, None, evidence=True)
    assert {(s.shards, s.per_shard) for s in v.shapes} == {(8, 1), (1, 8)}
    assert v.bounds() == "8 slots fit the capture"


def test_a_70_names_the_creation_that_evicted_the_session_in_its_shard():
    events = [ev(0, CREATE, 5), ev(121, TOUCH, 5), ev(122, CREATE, 7, size=2), ev(123, ABSENT, 5)]
    v = infer(events, None, None, evidence=True)
    [(victim, e)] = v.evictions.items()
    assert (victim, e.evictor, e.reason) == (5, 7, "smaller")


def test_given_the_cache_size_it_is_the_only_shape():
    v = infer([ev(0, CREATE, 5), ev(200, CREATE, 7)], 8, 8, evidence=False)
    assert v.told and [s.slots for s in v.shapes] == [8]
    [(victim, e)] = v.evictions.items()
    assert (victim, e.reason, e.idle_ms) == (5, "stale", 200 * S)
