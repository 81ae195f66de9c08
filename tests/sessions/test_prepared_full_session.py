"""A full fetch's session partitions built ahead in slices (FullFetchContext.prepare, what the broker does for a
fetch of many partitions so others are answered meanwhile) give the same session as building them at once, and
preparing changes nothing in the cache until the context answers."""

from __future__ import annotations

import random
import uuid

from fetchtool.sessions import (FetchManager, FetchMetadata, FetchSessionCache, FullFetchContext, PartitionData,
                                PartitionResult, TopicIdPartition)


def full_context(cache: FetchSessionCache, partitions: int) -> tuple[FullFetchContext, dict]:
    topic_id = uuid.UUID(int=7)
    data = {TopicIdPartition(topic_id, "t", p): PartitionData(fetch_offset=p, log_start_offset=0, max_bytes=100,
                                                               current_leader_epoch=-1, last_fetched_epoch=-1,
                                                               topic_id=topic_id)
            for p in range(partitions)}
    context = FetchManager(cache).new_context(0, 13, FetchMetadata(0, 0), False, data, [], {topic_id: "t"})
    assert isinstance(context, FullFetchContext)
    results = {tp: PartitionResult(error_code=0, high_watermark=p * 2, last_stable_offset=p * 2,
                                   log_start_offset=0) for p, tp in enumerate(data)}
    return context, results


def session_state(cache: FetchSessionCache, session_id: int) -> list[tuple]:
    session = cache.get(session_id)
    return [(tp, cp.fetch_offset, cp.high_watermark, cp.local_log_start_offset)
            for tp, cp in session.partition_map.items()]


def test_a_session_prepared_in_slices_equals_one_built_at_once():
    whole_cache = FetchSessionCache(max_slots=10, shards=1, rng=random.Random(3))
    sliced_cache = FetchSessionCache(max_slots=10, shards=1, rng=random.Random(3))
    whole, whole_results = full_context(whole_cache, 2500)
    sliced, sliced_results = full_context(sliced_cache, 2500)

    steps = sum(1 for _ in sliced.prepare(sliced_results, 1000))
    assert steps == 2 and sliced_cache.size == 0   # prepared, yielding twice; nothing created yet

    a = whole.update_and_generate_response(0, whole_results)
    b = sliced.update_and_generate_response(0, sliced_results)
    assert a.session_id == b.session_id != 0 and len(a.partitions) == len(b.partitions) == 2500
    assert session_state(whole_cache, a.session_id) == session_state(sliced_cache, b.session_id)


def test_results_changed_after_preparing_are_built_afresh():
    cache = FetchSessionCache(max_slots=10, shards=1, rng=random.Random(3))
    context, results = full_context(cache, 10)
    for _ in context.prepare(results, 4):
        pass
    extra = dict(results)
    extra.popitem()
    outcome = context.update_and_generate_response(0, extra)
    assert cache.get(outcome.session_id).size == 9
