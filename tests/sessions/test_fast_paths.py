"""The engine's shortcuts give what the long way gives.

FetchSessionHandler.build_from is new_builder() + add() of each partition + build() in one call; an incremental
request that sends and forgets nothing skips the session update but still closes a session that has no
partitions; the incremental response loop decides per partition exactly as maybe_update_response_data does.
"""

from __future__ import annotations

import uuid

from fetchtool.sessions import (FetchManager, FetchMetadata, FetchSessionCache, FetchSessionHandler, PartitionData,
                                PartitionResult, TopicIdPartition, TopicPartition, ZERO_UUID)
from fetchtool.sessions.client import topic_id_summary

ORDERS = uuid.UUID(int=0xA1)
CLICKS_OLD, CLICKS_NEW = uuid.UUID(int=0xB1), uuid.UUID(int=0xB2)


def _steps() -> list[dict[TopicPartition, PartitionData]]:
    """What a client wants, fetch after fetch: unchanged, altered, removed, added, a recreated topic (new id)."""
    o0, o1, c0 = TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("clicks", 0)
    first = {o0: PartitionData(0, topic_id=ORDERS), o1: PartitionData(0, topic_id=ORDERS),
             c0: PartitionData(0, topic_id=CLICKS_OLD)}
    same = dict(first)
    altered = {**first, o1: PartitionData(50, topic_id=ORDERS)}
    removed = {o1: altered[o1], c0: first[c0]}
    added = {**removed, o0: PartitionData(60, topic_id=ORDERS)}
    recreated = {**added, c0: PartitionData(0, topic_id=CLICKS_NEW)}
    no_ids = {TopicPartition("legacy", 0): PartitionData(7)}
    return [first, same, altered, removed, added, recreated, recreated, no_ids]


def _the_long_way(handler: FetchSessionHandler, wanted: dict[TopicPartition, PartitionData]):
    builder = handler.new_builder()
    for tp, data in wanted.items():
        builder.add(tp, data)
    return builder.build()


def _view(built) -> tuple:
    return (list(built.to_send.items()), built.to_forget, built.to_replace, list(built.session_partitions.items()),
            built.metadata, built.can_use_topic_ids)


def test_build_from_builds_what_a_builder_fed_one_partition_at_a_time_builds():
    long_way, short_way = FetchSessionHandler(1), FetchSessionHandler(1)
    for n, wanted in enumerate(_steps()):
        expected = _the_long_way(long_way, wanted)
        summary = topic_id_summary(wanted.items()) if n % 2 else None   # given, or worked out by build_from
        got = short_way.build_from(wanted, summary)
        assert _view(got) == _view(expected), f"step {n}"
        assert short_way.session_topic_names == long_way.session_topic_names
        for handler, built in ((long_way, expected), (short_way, got)):
            partitions = list(built.session_partitions) if built.metadata.is_full else []
            handler.handle_response(0, 500, 0, partitions, set(), 13)
        assert short_way.next_metadata == long_way.next_metadata


def test_build_from_leaves_the_callers_dict_alone():
    handler = FetchSessionHandler(1)
    wanted = _steps()[0]
    before = dict(wanted)
    handler.build_from(wanted)
    handler.handle_response(0, 500, 0, list(wanted), set(), 13)
    handler.build_from(_steps()[2])
    assert wanted == before and list(wanted) == list(before)


def _session(manager: FetchManager, fetch_data: dict, now: int = 0) -> int:
    ctx = manager.new_context(now, 12, FetchMetadata.INITIAL, False, fetch_data, [], {})
    return ctx.update_and_generate_response(now, {tp: PartitionResult(0, 10, 10, 0) for tp in fetch_data}
                                            ).session_id


def test_an_incremental_fetch_that_sends_nothing_keeps_the_session_and_answers_only_changes():
    manager = FetchManager(FetchSessionCache(10, 1))
    a, b = TopicIdPartition(ZERO_UUID, "orders", 0), TopicIdPartition(ZERO_UUID, "orders", 1)
    sid = _session(manager, {a: PartitionData(0), b: PartitionData(0)})
    ctx = manager.new_context(5, 12, FetchMetadata(sid, 1), False, {}, [], {})
    assert ctx.kind == "incremental"
    unchanged, grown = PartitionResult(0, 10, 10, 0), PartitionResult(0, 12, 12, 0, 300)
    outcome = ctx.update_and_generate_response(5, {a: grown, b: unchanged})
    assert [tp for tp, _ in outcome.partitions] == [a]
    assert list(ctx.session.partition_map) == [b, a]   # a returned records: moved to the back (KAFKA-12330)
    again = manager.new_context(6, 12, FetchMetadata(sid, 2), False, {}, [], {})
    # a's new HW is cached now, and b's result is the very object seen before: nothing to send
    assert again.update_and_generate_response(6, {b: unchanged, a: PartitionResult(0, 12, 12, 0)}).partitions == ()
    third = manager.new_context(7, 12, FetchMetadata(sid, 3), False, {}, [], {})
    assert [tp for tp, _ in third.update_and_generate_response(7, {b: unchanged, a: PartitionResult(0, 13, 13, 0)}
                                                               ).partitions] == [a]


def test_an_incremental_fetch_on_a_session_with_no_partitions_is_answered_sessionless_and_closes_it():
    cache = FetchSessionCache(10, 1)
    manager = FetchManager(cache)
    sid = _session(manager, {})          # Kafka creates a session from an empty full response too
    assert cache.get(sid) is not None
    ctx = manager.new_context(5, 12, FetchMetadata(sid, 1), False, {}, [], {})
    assert ctx.kind == "sessionless" and cache.get(sid) is None
