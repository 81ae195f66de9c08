"""The eviction walkthrough of Kafka's testSessionCache (spec §2.4), step by step, with the cache's events:
capacity 3, evictionMs 100, stale eviction, size-based eviction, privileged eviction."""

from __future__ import annotations

import random

from fetchtool.sessions import (
    INVALID_SESSION_ID, MAX_INT, CachedPartition, FetchSessionCacheShard, SessionCreated, SessionEvicted,
    TopicIdPartition, ZERO_UUID,
)


def partitions(n: int):
    return {TopicIdPartition(ZERO_UUID, "t", i): CachedPartition(TopicIdPartition(ZERO_UUID, "t", i))
            for i in range(n)}


def create(shard, now, size, privileged=False):
    return shard.maybe_create_session(now, privileged, size, False, lambda: partitions(size))


def test_worked_eviction_scenario_step_by_step():
    shard = FetchSessionCacheShard(3, 100, MAX_INT, 0, random.Random(5))

    # 1. id1 (t=0, 10 partitions), id2 (t=10, 20), id3 (t=20, 30).
    id1, id2, id3 = create(shard, 0, 10), create(shard, 10, 20), create(shard, 20, 30)
    assert [e for e in shard.drain_events()] == [
        SessionCreated(id1, 0, False, 10, 0), SessionCreated(id2, 10, False, 20, 0),
        SessionCreated(id3, 20, False, 30, 0)]

    # 2. Full: nothing is stale (LRU id1: 30-0 = 30 <= 100) and nothing is evictable (all younger than 100 ms
    #    at their last touch), so 40 partitions at t=30 and 5 partitions at t=40 are refused.
    assert create(shard, 30, 40) == INVALID_SESSION_ID
    assert create(shard, 40, 5) == INVALID_SESSION_ID
    assert shard.drain_events() == []
    assert shard.evictions_meter.count == 0

    # 3. touch(id1, 200): 200-0 > 100, so id1 joins both evictable sets (decided at touch time).
    shard.touch(shard.get(id1), 200)
    assert shard.get(id1)._in_all and shard.get(id1)._in_priv

    # 4. t=210, 11 partitions: the LRU entry is now id2 (last used 10), and 210-10 > 100: stale.
    id4 = create(shard, 210, 11)
    assert id4 != INVALID_SESSION_ID
    assert shard.get(id2) is None
    assert shard.drain_events() == [SessionEvicted(id2, 210, False, 20, "stale", id4, 0),
                                    SessionCreated(id4, 210, False, 11, 0)]

    # 5. Touch id1@400, id3@390, id4@400. At t=410 nothing is stale (LRU id3: 410-390 = 20), so a 50-partition
    #    newcomer evicts the least valuable evictable session: id1 (size 10; id3 and id4 are older than 100 ms
    #    at their touch too, but larger).
    shard.touch(shard.get(id1), 400)
    shard.touch(shard.get(id3), 390)
    shard.touch(shard.get(id4), 400)
    id5 = create(shard, 410, 50)
    assert shard.get(id1) is None
    assert shard.drain_events() == [SessionEvicted(id1, 410, False, 10, "smaller", id5, 0),
                                    SessionCreated(id5, 410, False, 50, 0)]

    # 6. A 5-partition unprivileged newcomer is refused: the smallest evictable is id4 (11 > 5).
    assert create(shard, 410, 5) == INVALID_SESSION_ID

    # 7. A privileged 5-partition newcomer evicts id4: (True, 5, 0) > (False, 11, id4).
    id6 = create(shard, 410, 5, privileged=True)
    assert shard.get(id4) is None
    assert shard.drain_events() == [SessionEvicted(id4, 410, False, 11, "privileged", id6, 0),
                                    SessionCreated(id6, 410, True, 5, 0)]

    # 8. Final cache: {id3, id5, id6}; three evictions on the meter; 30 + 50 + 5 partitions cached.
    assert {s.id for s in shard.sessions()} == {id3, id5, id6}
    assert shard.evictions_meter.count == 3
    assert shard.total_partitions == 85


def test_equal_size_newcomer_cannot_evict():
    """EvictableKey(privileged, size, id=0) < (privileged, size, id>0): a newcomer needs strictly more partitions."""
    shard = FetchSessionCacheShard(1, 100, MAX_INT, 0, random.Random(5))
    old = create(shard, 0, 10)
    shard.touch(shard.get(old), 150)          # older than 100 ms at this touch: evictable by all
    assert create(shard, 160, 10) == INVALID_SESSION_ID
    assert create(shard, 160, 11) != INVALID_SESSION_ID
    assert shard.get(old) is None


def test_staleness_is_strictly_greater_and_only_the_lru_entry_is_tested():
    shard = FetchSessionCacheShard(2, 100, MAX_INT, 0, random.Random(5))
    a = create(shard, 0, 10)
    b = create(shard, 50, 10)
    assert create(shard, 100, 1) == INVALID_SESSION_ID      # 100 - 0 == 100 is not stale
    c = create(shard, 101, 1)                                # 101 - 0 > 100: a (the LRU entry) goes
    assert shard.get(a) is None and shard.get(b) is not None and shard.get(c) is not None


def test_privileged_session_is_protected_until_old_at_a_touch():
    shard = FetchSessionCacheShard(1, 100, MAX_INT, 0, random.Random(5))
    follower = create(shard, 0, 5, privileged=True)
    shard.touch(shard.get(follower), 90)                    # young at this touch: in neither evictable set
    assert create(shard, 95, 50, privileged=True) == INVALID_SESSION_ID
    shard.touch(shard.get(follower), 150)                   # 150 - 0 > 100 at this touch: evictable by size
    newcomer = create(shard, 160, 6, privileged=True)
    assert newcomer != INVALID_SESSION_ID and shard.get(follower) is None
