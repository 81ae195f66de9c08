"""Kafka's sharded FetchSessionCache (KAFKA-9401, 3.8): per-shard id ranges, round robin on every full
response, per-shard capacity, the pre-3.8 single cache, and out-of-range session ids."""

from __future__ import annotations

import random
import uuid

import pytest

from fetchtool.sessions import (
    FETCH_SESSION_ID_NOT_FOUND, INVALID_SESSION_ID, MAX_INT, NONE, UNKNOWN_SERVER_ERROR, FetchManager,
    FetchMetadata, FetchSessionCache, FetchSessionCacheShard, OutOfRangeSessionContext, PartitionData, PartitionResult, SessionRemoved,
    TopicIdPartition, ZERO_UUID, to_positive,
)

FOO = uuid.UUID(int=0xF00)


def full_request(manager, now, n=1, version=17, metadata=FetchMetadata.INITIAL):
    data = {TopicIdPartition(FOO, "foo", i): PartitionData(0, topic_id=FOO) for i in range(n)}
    return manager.new_context(now, version, metadata, False, data, [], {FOO: "foo"})


def answer(ctx, now=0):
    return ctx.update_and_generate_response(now, {tp: PartitionResult(high_watermark=1, log_start_offset=0)
                                                  for tp, _ in ctx.partitions()})


def test_defaults_are_kafkas():
    cache = FetchSessionCache()
    assert len(cache.shards) == 8
    assert [s.max_entries for s in cache.shards] == [125] * 8
    assert cache.eviction_ms == 120_000
    assert cache.session_id_range == 268435455


@pytest.mark.parametrize("shards", [1, 3, 8])
def test_each_shard_issues_ids_in_its_own_range(shards):
    cache = FetchSessionCache(max_slots=1000, shards=shards, rng=random.Random(9))
    r = MAX_INT // shards
    for k, shard in enumerate(cache.shards):
        for _ in range(2000):
            sid = shard.new_session_id()
            assert max(1, k * r) <= sid < (k + 1) * r
            assert cache.get_cache_shard(sid) is shard


def test_shard_ids_hit_the_edges_of_a_tiny_range():
    shard = FetchSessionCacheShard(10, 1000, 3, 1, random.Random(1))
    assert {shard.new_session_id() for _ in range(200)} == {3, 4, 5}
    shard0 = FetchSessionCacheShard(10, 1000, 3, 0, random.Random(1))
    assert {shard0.new_session_id() for _ in range(200)} == {1, 2}      # never 0


def test_single_shard_is_the_pre_3_8_cache():
    cache = FetchSessionCache(max_slots=3, shards=1, rng=random.Random(2))
    assert cache.session_id_range == MAX_INT and cache.shards[0].max_entries == 3
    manager = FetchManager(cache)
    sids = [answer(full_request(manager, 0)).session_id for _ in range(4)]
    assert all(1 <= s < MAX_INT for s in sids[:3])
    assert sids[3] == INVALID_SESSION_ID                     # full, nothing evictable
    assert cache.get_cache_shard(MAX_INT - 1) is cache.shards[0]


@pytest.mark.parametrize("session_id", [MAX_INT, -MAX_INT, -(2**31)])
def test_the_pre_3_8_single_cache_has_no_out_of_range_session_ids(session_id):
    # Before 3.8 a session id was looked up in one map: INT_MAX or a large negative id simply misses (70), and a
    # full request naming it is an ordinary full request; only the sharded cache indexes a shard list with it.
    manager = FetchManager(FetchSessionCache(max_slots=3, shards=1, rng=random.Random(2)))
    assert manager.new_context(0, 17, FetchMetadata(session_id, 4), False, {}, [], {}).error_code == \
        FETCH_SESSION_ID_NOT_FOUND
    created = answer(full_request(manager, 0, metadata=FetchMetadata(session_id, 0)))
    assert created.error_code == NONE and created.session_id != INVALID_SESSION_ID


def test_round_robin_counter_advances_on_every_full_response_even_without_a_session():
    cache = FetchSessionCache(max_slots=8, shards=8, rng=random.Random(4))   # one slot per shard
    manager = FetchManager(cache)
    first = [answer(full_request(manager, 0)).session_id for _ in range(8)]
    assert [cache.get_cache_shard(s).shard_num for s in first] == list(range(8))
    assert cache.counter == 8
    # Every shard is full now: the next full responses create nothing but still move the counter.
    assert answer(full_request(manager, 1)).session_id == INVALID_SESSION_ID
    assert answer(full_request(manager, 1)).session_id == INVALID_SESSION_ID
    assert cache.counter == 10
    # Another shard may have room while the chosen one refuses: free shard 3, the counter points at shard 2.
    cache.remove(first[3])
    assert answer(full_request(manager, 2)).session_id == INVALID_SESSION_ID   # shard 2 is full
    created = answer(full_request(manager, 2)).session_id                      # shard 3 has the slot
    assert cache.get_cache_shard(created).shard_num == 3


def test_throttled_full_and_sessionless_contexts_do_not_advance_the_counter():
    cache = FetchSessionCache(rng=random.Random(4))
    manager = FetchManager(cache)
    out = full_request(manager, 0).throttled_response(250)
    assert (out.error_code, out.session_id, out.throttle_time_ms, out.partitions) == (NONE, 0, 250, ())
    assert cache.counter == 0 and cache.size == 0
    answer(full_request(manager, 0, metadata=FetchMetadata.LEGACY))
    assert cache.counter == 0 and cache.size == 0
    answer(full_request(manager, 0))
    assert cache.counter == 1 and cache.size == 1


def test_counter_wraps_like_a_java_int():
    cache = FetchSessionCache(rng=random.Random(4))
    cache.counter = MAX_INT - 1
    picks = [cache.get_next_cache_shard().shard_num for _ in range(4)]
    # toPositive(MAX-1) % 8 = 6, toPositive(MAX) % 8 = 7, toPositive(MIN) = 0, toPositive(MIN+1) = 1
    assert picks == [6, 7, 0, 1]
    assert cache.counter == -(2**31) + 2
    assert to_positive(-1) == MAX_INT


def test_counters_are_per_cache_instance():
    a, b = FetchSessionCache(rng=random.Random(1)), FetchSessionCache(rng=random.Random(1))
    for _ in range(3):
        a.get_next_cache_shard()
    assert b.get_next_cache_shard().shard_num == 0


def test_fewer_slots_than_shards_disables_sessions():
    cache = FetchSessionCache(max_slots=7, shards=8)
    manager = FetchManager(cache)
    assert answer(full_request(manager, 0)).session_id == INVALID_SESSION_ID


@pytest.mark.parametrize("bad_id", [MAX_INT // 8 * 8, MAX_INT, -(MAX_INT // 8), -(2**31)])
@pytest.mark.parametrize("epoch", [0, 1, -1])
def test_out_of_range_session_id_is_an_unknown_server_error(bad_id, epoch):
    """Inferred (spec §2.2): getCacheShard throws, KafkaApis answers getErrorResponse."""
    manager = FetchManager(FetchSessionCache())
    metadata = FetchMetadata(bad_id, epoch)
    for version, expect_partitions in ((12, 2), (17, 0)):
        data = ({TopicIdPartition(ZERO_UUID, "foo", i): PartitionData(0) for i in range(2)} if version < 13 else
                {TopicIdPartition(FOO, "foo", i): PartitionData(0, topic_id=FOO) for i in range(2)})
        ctx = manager.new_context(0, version, metadata, False, data, [], {FOO: "foo"})
        assert isinstance(ctx, OutOfRangeSessionContext)
        assert ctx.kind == "error" and ctx.error_code == UNKNOWN_SERVER_ERROR
        assert ctx.partitions() == []
        out = ctx.update_and_generate_response(0, {})
        assert out.error_code == UNKNOWN_SERVER_ERROR
        assert out.session_id == bad_id
        assert len(out.partitions) == expect_partitions
        assert all(r.error_code == UNKNOWN_SERVER_ERROR for _, r in out.partitions)


def test_small_negative_session_ids_map_to_shard_zero_and_miss():
    cache = FetchSessionCache()
    manager = FetchManager(cache)
    assert cache.get_cache_shard(-(MAX_INT // 8) + 1) is cache.shards[0]
    ctx = manager.new_context(0, 17, FetchMetadata(-5, 3), False, {}, [], {})
    assert ctx.error_code == FETCH_SESSION_ID_NOT_FOUND
    # kafka-go's (-1, -1): full and sessionless, harmless.
    ctx = full_request(manager, 0, metadata=FetchMetadata(-1, -1))
    assert ctx.kind == "sessionless"


def test_metrics_sum_over_shards_and_events_name_the_shard():
    cache = FetchSessionCache(max_slots=16, shards=8, eviction_ms=100, rng=random.Random(6))
    manager = FetchManager(cache)
    sids = [answer(full_request(manager, 0, n=i + 1)).session_id for i in range(3)]
    assert cache.metrics() == {"NumIncrementalFetchSessions": 3, "NumIncrementalFetchPartitionsCached": 6,
                               "IncrementalFetchSessionEvictionsPerSec": 0}
    events = cache.drain_events()
    assert [(e.session_id, e.shard) for e in events] == [(s, k) for k, s in enumerate(sids)]
    # A full request naming a session closes it.
    answer(full_request(manager, 5, metadata=FetchMetadata(sids[1], -1)))
    assert cache.drain_events() == [SessionRemoved(sids[1], 5, False, 2, "closed", 1)]
    assert cache.metrics()["NumIncrementalFetchSessions"] == 2
