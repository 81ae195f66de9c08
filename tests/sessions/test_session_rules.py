"""Spec §2.1/§2.2/§2.5 and §3.3 rules beyond Kafka's own unit tests: metadata arithmetic, check order, errors that
leave the session untouched, duplicate requests, throttling, the mustRespond rules, and the client's reactions."""

from __future__ import annotations

import random
import uuid

import pytest

from fetchtool.sessions import (
    FETCH_SESSION_ID_NOT_FOUND, FETCH_SESSION_TOPIC_ID_ERROR, FINAL_EPOCH, INVALID_FETCH_SESSION_EPOCH, MAX_INT,
    NONE, NOT_LEADER_OR_FOLLOWER, FetchManager, FetchMetadata, FetchSessionCache, FetchSessionHandler,
    PartitionData, PartitionResult, SessionRemoved, TopicIdPartition, TopicPartition, next_epoch,
)

FOO = uuid.UUID(int=0xF00)
NAMES = {FOO: "foo"}


def tp(i: int) -> TopicIdPartition:
    return TopicIdPartition(FOO, "foo", i)


def r(hw: int = 10, log_start: int = 0, **kw) -> PartitionResult:
    return PartitionResult(high_watermark=hw, log_start_offset=log_start, **kw)


@pytest.fixture
def broker():
    cache = FetchSessionCache(max_slots=80, shards=8, eviction_ms=1000, rng=random.Random(11))
    return cache, FetchManager(cache)


def open_session(manager, n=3, now=0, version=17):
    data = {tp(i): PartitionData(0, topic_id=FOO) for i in range(n)}
    ctx = manager.new_context(now, version, FetchMetadata.INITIAL, False, data, [], NAMES)
    return ctx.update_and_generate_response(now, {k: r() for k in data}).session_id


def incremental(manager, sid, epoch, now=0, data=None, forget=(), version=17):
    return manager.new_context(now, version, FetchMetadata(sid, epoch), False, data or {}, list(forget), NAMES)


# -------------------------------------------------------------------------------- FetchMetadata (§2.1)
def test_metadata_rules():
    assert next_epoch(0) == 1 and next_epoch(41) == 42
    assert next_epoch(MAX_INT) == 1                      # wraps to 1, never 0
    assert next_epoch(-1) == -1 and next_epoch(-7) == -1
    assert FetchMetadata.INITIAL == FetchMetadata(0, 0) and FetchMetadata.LEGACY == FetchMetadata(0, -1)
    assert FetchMetadata(5, 0).is_full and FetchMetadata(5, -1).is_full
    assert not FetchMetadata(5, 1).is_full and not FetchMetadata(5, -2).is_full
    assert FetchMetadata.new_incremental(9) == FetchMetadata(9, 1)
    assert FetchMetadata(9, MAX_INT).next_incremental() == FetchMetadata(9, 1)
    assert FetchMetadata(9, 4).next_close_existing() == FetchMetadata(9, FINAL_EPOCH)
    assert FetchMetadata(9, 4).next_close_existing_attempt_new() == FetchMetadata(9, 0)


# -------------------------------------------------------------------------------- newContext (§2.2)
def test_errors_leave_the_session_untouched_and_epoch_is_checked_before_version(broker):
    cache, manager = broker
    sid = open_session(manager, now=0)
    session = cache.get(sid)
    # Wrong epoch AND wrong version: the epoch is checked first.
    ctx = incremental(manager, sid, 7, now=500, version=12)
    assert ctx.error_code == INVALID_FETCH_SESSION_EPOCH
    ctx = incremental(manager, sid, 1, now=500, version=12)
    assert ctx.error_code == FETCH_SESSION_TOPIC_ID_ERROR
    assert (session.epoch, session.last_used_ms, cache.get(sid)) == (1, 0, session)
    out = ctx.update_and_generate_response(500, {})
    assert (out.error_code, out.session_id, out.partitions) == (FETCH_SESSION_TOPIC_ID_ERROR, 0, ())
    # An incremental request with SessionId 0 is looked up and not found.
    assert incremental(manager, 0, 1).error_code == FETCH_SESSION_ID_NOT_FOUND
    # Epochs <= -2 take the incremental path.
    assert incremental(manager, sid, -2).error_code == INVALID_FETCH_SESSION_EPOCH
    assert incremental(manager, sid + 1, -2).error_code == FETCH_SESSION_ID_NOT_FOUND


def test_touch_and_epoch_advance_happen_at_request_time(broker):
    cache, manager = broker
    sid = open_session(manager, now=0)
    ctx = incremental(manager, sid, 1, now=700)
    session = cache.get(sid)
    assert (session.epoch, session.last_used_ms) == (2, 700)
    # A retry of the processed request (same epoch) is INVALID_FETCH_SESSION_EPOCH.
    assert incremental(manager, sid, 1, now=710).error_code == INVALID_FETCH_SESSION_EPOCH
    assert ctx.update_and_generate_response(900, {}).error_code == NONE


def test_duplicate_request_race_answers_71_with_the_session_id(broker):
    cache, manager = broker
    sid = open_session(manager)
    first = incremental(manager, sid, 1)
    second = incremental(manager, sid, 2)            # processed before the first one answered
    out = first.update_and_generate_response(0, {k: r() for k, _ in first.partitions()})
    assert (out.error_code, out.session_id, out.partitions) == (INVALID_FETCH_SESSION_EPOCH, sid, ())
    assert first.throttled_response(30).error_code == INVALID_FETCH_SESSION_EPOCH
    assert first.response_size_partitions({tp(0): r(hw=99)}) == []
    assert second.update_and_generate_response(0, {}).error_code == NONE


def test_throttled_incremental_keeps_the_session_and_the_advanced_epoch(broker):
    cache, manager = broker
    sid = open_session(manager)
    ctx = incremental(manager, sid, 1, data={tp(0): PartitionData(55, topic_id=FOO)})
    out = ctx.throttled_response(100)
    assert (out.error_code, out.session_id, out.throttle_time_ms, out.partitions) == (NONE, sid, 100, ())
    assert cache.get(sid).epoch == 2
    assert cache.get(sid).get_fetch_offset(tp(0)) == 55


def test_full_request_with_id_closes_the_named_session_first(broker):
    cache, manager = broker
    sid = open_session(manager)
    cache.drain_events()
    ctx = manager.new_context(5, 17, FetchMetadata(sid, 0), False, {tp(0): PartitionData(0, topic_id=FOO)}, [],
                              NAMES)
    assert cache.get(sid) is None
    new = ctx.update_and_generate_response(5, {tp(0): r()}).session_id
    assert new not in (0, sid)
    events = cache.drain_events()
    assert events[0] == SessionRemoved(sid, 5, False, 3, "closed", cache.get_cache_shard(sid).shard_num)
    assert events[1].session_id == new


def test_forgetting_every_partition_removes_the_session(broker):
    cache, manager = broker
    sid = open_session(manager, n=2)
    cache.drain_events()
    ctx = incremental(manager, sid, 1, now=3, forget=[tp(0), tp(1)])
    assert ctx.kind == "sessionless"
    assert ctx.update_and_generate_response(3, {}).session_id == 0
    assert cache.get(sid) is None
    assert [e.reason for e in cache.drain_events()] == ["empty"]


def test_epoch_wraps_from_max_int_to_one(broker):
    cache, manager = broker
    sid = open_session(manager)
    cache.get(sid).epoch = MAX_INT
    incremental(manager, sid, MAX_INT)
    assert cache.get(sid).epoch == 1
    assert incremental(manager, sid, 1).kind == "incremental"


# -------------------------------------------------------------------------------- mustRespond (§2.5)
def test_must_respond_rules(broker):
    cache, manager = broker
    sid = open_session(manager, n=7)
    ctx = incremental(manager, sid, 1)
    results = {
        tp(0): r(),                                           # unchanged: implied
        tp(1): r(records_size=100),                           # records
        tp(2): r(hw=11),                                      # HW changed
        tp(3): r(log_start=5),                                # log start offset changed
        tp(4): r(preferred_read_replica=2),                   # preferred read replica
        tp(5): r(last_stable_offset=9),                       # LSO alone is not tracked
        tp(6): r(diverging_epoch=3),                          # diverging epoch
    }
    assert ctx.response_size_partitions(results) == [tp(1), tp(2), tp(3), tp(4), tp(6)]
    assert ctx.response_size_partitions(results) == [tp(1), tp(2), tp(3), tp(4), tp(6)]   # no state change
    out = ctx.update_and_generate_response(0, results)
    assert [k for k, _ in out.partitions] == [tp(1), tp(2), tp(3), tp(4), tp(6)]
    # Only the partition that returned records moved to the end.
    assert [k.partition for k in cache.get(sid).partitions()] == [0, 2, 3, 4, 5, 6, 1]


def test_error_forces_cached_hw_to_minus_one_so_the_partition_is_resent(broker):
    cache, manager = broker
    sid = open_session(manager, n=2)
    ctx = incremental(manager, sid, 1)
    out = ctx.update_and_generate_response(0, {tp(0): r(error_code=NOT_LEADER_OR_FOLLOWER), tp(1): r()})
    assert [k for k, _ in out.partitions] == [tp(0)]
    ctx = incremental(manager, sid, 2)
    out = ctx.update_and_generate_response(0, {tp(0): r(), tp(1): r()})      # same HW as before the error
    assert [k for k, _ in out.partitions] == [tp(0)]
    ctx = incremental(manager, sid, 3)
    assert ctx.update_and_generate_response(0, {tp(0): r(), tp(1): r()}).partitions == ()


def test_new_partitions_start_at_minus_one_and_are_always_sent_once(broker):
    cache, manager = broker
    sid = open_session(manager, n=1)
    ctx = incremental(manager, sid, 1, data={tp(5): PartitionData(0, topic_id=FOO)})
    assert [k for k, _ in ctx.partitions()] == [tp(0), tp(5)]
    out = ctx.update_and_generate_response(0, {tp(0): r(), tp(5): r()})
    assert [k for k, _ in out.partitions] == [tp(5)]


def test_full_session_caches_the_response_in_response_order(broker):
    cache, manager = broker
    data = {tp(0): PartitionData(0, topic_id=FOO), tp(1): PartitionData(0, topic_id=FOO)}
    ctx = manager.new_context(0, 17, FetchMetadata.INITIAL, False, data, [], NAMES)
    # Erroneous partitions come after readable ones, as KafkaApis appends them.
    out = ctx.update_and_generate_response(0, {tp(1): r(hw=4), tp(0): r(hw=-1, error_code=3)})
    session = cache.get(out.session_id)
    assert [k.partition for k in session.partitions()] == [1, 0]
    assert session.partition_map[tp(1)].high_watermark == 4
    assert session.uses_topic_ids and not session.privileged


# -------------------------------------------------------------------------------- client reactions (§3.3)
def handler_with_session(sid=123):
    h = FetchSessionHandler(1)
    b = h.new_builder()
    b.add(TopicPartition("foo", 0), PartitionData(0, topic_id=FOO))
    b.build()
    assert h.handle_response(NONE, sid, 0, [TopicPartition("foo", 0)], {FOO}, 17)
    assert h.next_metadata == FetchMetadata(sid, 1)
    return h


def test_throttled_empty_full_response_is_unusable():
    h = FetchSessionHandler(1)
    b = h.new_builder()
    b.add(TopicPartition("foo", 0), PartitionData(0, topic_id=FOO))
    b.build()
    assert not h.handle_response(NONE, 0, 100, [], set(), 17)
    assert h.next_metadata == FetchMetadata.INITIAL


def test_invalid_full_response_resets_to_initial():
    h = FetchSessionHandler(1)
    b = h.new_builder()
    b.add(TopicPartition("foo", 0), PartitionData(0, topic_id=FOO))
    b.build()
    assert not h.handle_response(NONE, 77, 0, [TopicPartition("foo", 1)], {FOO}, 17)
    assert h.next_metadata == FetchMetadata.INITIAL
    assert "sent an invalid full fetch response with omittedPartitions=(foo-0), extraPartitions=(foo-1)" \
        in h.last_message


def test_incremental_response_outcomes():
    h = handler_with_session()
    # A valid empty incremental response (also when throttled) moves to the next epoch.
    assert h.handle_response(NONE, 123, 50, [], set(), 17)
    assert h.next_metadata == FetchMetadata(123, 2)
    # Partitions outside the session: close and try a new one.
    assert not h.handle_response(NONE, 123, 0, [TopicPartition("bar", 0)], {FOO}, 17)
    assert h.next_metadata == FetchMetadata(123, 0)
    h = handler_with_session()
    assert not h.handle_response(NONE, 123, 0, [], {uuid.UUID(int=5)}, 17)       # unknown topic id
    assert h.next_metadata == FetchMetadata(123, 0)
    # SessionId 0 on an incremental response: the server closed the session.
    h = handler_with_session()
    assert h.handle_response(NONE, 0, 0, [], set(), 17)
    assert h.next_metadata == FetchMetadata.INITIAL


def test_handle_error_and_notify_close():
    h = handler_with_session()
    h.handle_error()
    assert h.next_metadata == FetchMetadata(123, 0)
    h = handler_with_session()
    h.notify_close()
    assert h.next_metadata == FetchMetadata(123, FINAL_EPOCH)
    data = h.new_builder().build()                        # the close request: no partitions, full
    assert data.metadata == FetchMetadata(123, -1) and data.to_send == {}


def test_client_and_broker_engines_agree_over_a_conversation(broker):
    """The handler's requests against the FetchManager: session created, incremental, duplicate, recovery."""
    cache, manager = broker
    h = FetchSessionHandler(1)

    def exchange(offsets: dict[int, int], now: int):
        b = h.new_builder()
        for p, off in offsets.items():
            b.add(TopicPartition("foo", p), PartitionData(off, topic_id=FOO))
        req = b.build()
        fetch = {TopicIdPartition(FOO, "foo", k.partition): v for k, v in req.to_send.items()}
        forget = req.forgotten_for_version(17)
        ctx = manager.new_context(now, 17, req.metadata, False, fetch, forget, NAMES)
        out = ctx.update_and_generate_response(now, {k: r(hw=100) for k, _ in ctx.partitions()})
        parts = [TopicPartition(k.topic, k.partition) for k, _ in out.partitions]
        ok = h.handle_response(out.error_code, out.session_id, 0, parts, {k.topic_id for k, _ in out.partitions}, 17)
        return req, out, ok

    req, out, ok = exchange({0: 0, 1: 0}, 0)
    assert req.metadata.is_full and ok and out.session_id and len(out.partitions) == 2
    sid = out.session_id
    req, out, ok = exchange({0: 5, 1: 0}, 10)
    assert req.metadata == FetchMetadata(sid, 1) and list(req.to_send) == [TopicPartition("foo", 0)]
    assert ok and out.partitions == ()
    # A duplicate of the last request (e.g. resent after a timeout) hits the advanced epoch.
    dup = manager.new_context(20, 17, FetchMetadata(sid, 1), False, {}, [], NAMES)
    assert dup.error_code == INVALID_FETCH_SESSION_EPOCH
    h.next_metadata = FetchMetadata(sid, 1)              # the client lost track, as after KAFKA-8052
    req, out, ok = exchange({0: 5, 1: 0}, 30)
    assert out.error_code == INVALID_FETCH_SESSION_EPOCH and not ok
    assert h.next_metadata == FetchMetadata(sid, 0)
    req, out, ok = exchange({0: 5, 1: 0}, 40)
    assert req.metadata == FetchMetadata(sid, 0) and ok and out.session_id not in (0, sid)
    assert cache.get(sid) is None and cache.size == 1
