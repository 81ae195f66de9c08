"""Kafka's broker FetchSessionTest (server/src/test/java/org/apache/kafka/server/FetchSessionTest.java, the Java
port of core/src/test/scala/unit/kafka/server/FetchSessionTest.scala), scenario by scenario, same names and
assertions, run against fetchtool.sessions.

Requests are built the way the broker sees them after decoding the wire: v13+ keys partitions by topic id with
the name resolved through the broker's topic_names (None when unknown); v12 keys them by name with zero ids.
(Kafka's in-memory test requests keep topic ids even at v12; on the wire they do not exist.)
"""

from __future__ import annotations

import random
import uuid

import pytest

from fetchtool.sessions import (
    FETCH_SESSION_ID_NOT_FOUND, FETCH_SESSION_TOPIC_ID_ERROR, INCONSISTENT_TOPIC_ID, INVALID_FETCH_SESSION_EPOCH,
    INVALID_SESSION_ID, MAX_INT, NONE, UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION, ZERO_UUID, CachedPartition,
    FetchManager, FetchMetadata, FetchSessionCache, FetchSessionCacheShard, FullFetchContext,
    IncrementalFetchContext, PartitionData, PartitionResult, SessionErrorContext, SessionIdOutOfRange,
    SessionlessFetchContext, TopicIdPartition,
)
from fetchtool.sessions.metadata import FINAL_EPOCH

LATEST = 17          # FETCH.latestVersion() at the reference commit
INITIAL = FetchMetadata.INITIAL
RNG = random.Random(227)


def new_id() -> uuid.UUID:
    return uuid.UUID(int=RNG.getrandbits(128))


def tip(topic_id: uuid.UUID, topic: str | None, partition: int) -> TopicIdPartition:
    return TopicIdPartition(topic_id, topic, partition)


def single_shard(max_entries: int = 10, eviction_ms: int = 1000) -> tuple[FetchSessionCacheShard, FetchManager]:
    """Kafka's `new FetchManager(time, new FetchSessionCacheShard(max, evictionMs, MAX_VALUE, 0))`."""
    cache = FetchSessionCache(max_slots=max_entries, shards=1, eviction_ms=eviction_ms, rng=random.Random(1))
    return cache.shards[0], FetchManager(cache)


def context(manager: FetchManager, metadata: FetchMetadata, data: dict[TopicIdPartition, PartitionData],
            topic_names: dict[uuid.UUID, str], *, forget=(), version: int = LATEST, follower: bool = False,
            now: int = 0):
    """fetchManager.newContext(request.version, request.metadata, request.isFromFollower,
    request.fetchData(topicNames), request.forgottenTopics(topicNames), topicNames)."""
    def decode(tp: TopicIdPartition) -> TopicIdPartition:
        if version >= 13:
            return tip(tp.topic_id, topic_names.get(tp.topic_id), tp.partition)
        return tip(ZERO_UUID, tp.topic, tp.partition)

    def decode_data(d: PartitionData) -> PartitionData:
        if version >= 13:
            return d
        return PartitionData(d.fetch_offset, d.log_start_offset, d.max_bytes, d.current_leader_epoch,
                             d.last_fetched_epoch, ZERO_UUID)

    fetch_data = {decode(tp): decode_data(d) for tp, d in data.items()}
    return manager.new_context(now, version, metadata, follower, fetch_data, [decode(tp) for tp in forget],
                               topic_names)


def simple_context(manager, metadata, partitions, topic_names, *, forget=(), now=0):
    """The test's newContext(metadata, partitions, [toForget,] fetchManager, topicNames) helper."""
    data = {tp: PartitionData(0, 0, 100, topic_id=tp.topic_id) for tp in partitions}
    return context(manager, metadata, data, topic_names, forget=forget, now=now)


def resp(hw: int, lso: int, log_start: int, **kw) -> PartitionResult:
    return PartitionResult(high_watermark=hw, last_stable_offset=lso, log_start_offset=log_start, **kw)


def error_response(code: int) -> PartitionResult:
    return PartitionResult(error_code=code, high_watermark=-1, last_stable_offset=-1, log_start_offset=-1)


def order(ctx) -> list[tuple]:
    """assertPartitionsOrder: Kafka compares TopicIdPartition with names, so compare (id, name, partition)."""
    return [(tp.topic_id, tp.topic, tp.partition) for tp, _ in ctx.partitions()]


def ids(*tps: TopicIdPartition) -> list[tuple]:
    return [(tp.topic_id, tp.topic, tp.partition) for tp in tps]


def session_id_of(ctx) -> int:
    """updateAndGenerateResponseDataSessionId: unresolved partitions answer UNKNOWN_TOPIC_ID."""
    results = {tp: error_response(UNKNOWN_TOPIC_ID) if tp.topic is None else resp(10, 10, 10)
               for tp, _ in ctx.partitions()}
    return ctx.update_and_generate_response(0, results).session_id


def respond_with_errors(ctx):
    """updateAndGenerateResponseData: unresolved -> UNKNOWN_TOPIC_ID, resolved -> UNKNOWN_TOPIC_OR_PARTITION."""
    results = {tp: error_response(UNKNOWN_TOPIC_ID if tp.topic is None else UNKNOWN_TOPIC_OR_PARTITION)
               for tp, _ in ctx.partitions()}
    return ctx.update_and_generate_response(0, results)


def response_errors(outcome, names: dict[uuid.UUID, str]) -> dict[tuple[str, int], int]:
    """response.responseData(topicNames, version) reduced to {(topic, partition): errorCode}."""
    return {(names[tp.topic_id], tp.partition): r.error_code for tp, r in outcome.partitions}


def create_partitions(size: int) -> dict[TopicIdPartition, CachedPartition]:
    parts = {}
    for i in range(size):
        key = tip(new_id(), "test", i)
        parts[key] = CachedPartition(key)
    return parts


def assert_cache_contains(shard: FetchSessionCacheShard, *session_ids: int) -> None:
    for i, sid in enumerate(session_ids, 1):
        assert shard.get(sid) is not None, f"Missing session {i} out of {len(session_ids)} {sid}"
    assert shard.size == len(session_ids)


# ------------------------------------------------------------------------------------------------ cache


def test_new_session_id():
    shard = FetchSessionCacheShard(3, 100, MAX_INT, 0, random.Random(7))
    for _ in range(10_000):
        assert shard.new_session_id() > 0


def test_session_cache():
    shard = FetchSessionCacheShard(3, 100, MAX_INT, 0, random.Random(7))
    assert shard.size == 0
    id1 = shard.maybe_create_session(0, False, 10, True, lambda: create_partitions(10))
    id2 = shard.maybe_create_session(10, False, 20, True, lambda: create_partitions(20))
    id3 = shard.maybe_create_session(20, False, 30, True, lambda: create_partitions(30))
    assert shard.maybe_create_session(30, False, 40, True, lambda: create_partitions(40)) == INVALID_SESSION_ID
    assert shard.maybe_create_session(40, False, 5, True, lambda: create_partitions(5)) == INVALID_SESSION_ID
    assert_cache_contains(shard, id1, id2, id3)

    shard.touch(shard.get(id1), 200)
    id4 = shard.maybe_create_session(210, False, 11, True, lambda: create_partitions(11))
    assert_cache_contains(shard, id1, id3, id4)

    shard.touch(shard.get(id1), 400)
    shard.touch(shard.get(id3), 390)
    shard.touch(shard.get(id4), 400)
    id5 = shard.maybe_create_session(410, False, 50, True, lambda: create_partitions(50))
    assert_cache_contains(shard, id3, id4, id5)
    assert shard.maybe_create_session(410, False, 5, True, lambda: create_partitions(5)) == INVALID_SESSION_ID

    id6 = shard.maybe_create_session(410, True, 5, True, lambda: create_partitions(5))
    assert_cache_contains(shard, id3, id5, id6)


def test_resize_cached_sessions():
    shard = FetchSessionCacheShard(2, 100, MAX_INT, 0, random.Random(7))
    assert shard.total_partitions == 0
    assert shard.size == 0
    assert shard.evictions_meter.count == 0

    id1 = shard.maybe_create_session(0, False, 2, True, lambda: create_partitions(2))
    assert id1 > 0
    assert_cache_contains(shard, id1)
    session1 = shard.get(id1)
    assert session1.size == 2
    assert shard.total_partitions == 2
    assert shard.size == 1
    assert shard.evictions_meter.count == 0

    id2 = shard.maybe_create_session(0, False, 4, True, lambda: create_partitions(4))
    session2 = shard.get(id2)
    assert id2 > 0
    assert_cache_contains(shard, id1, id2)
    assert shard.total_partitions == 6
    assert shard.size == 2
    assert shard.evictions_meter.count == 0

    shard.touch(session1, 200)
    shard.touch(session2, 200)
    id3 = shard.maybe_create_session(200, False, 5, True, lambda: create_partitions(5))
    assert id3 > 0
    assert_cache_contains(shard, id2, id3)
    assert shard.total_partitions == 9
    assert shard.size == 2
    assert shard.evictions_meter.count == 1

    shard.remove(id3)
    assert_cache_contains(shard, id2)
    assert shard.size == 1
    assert shard.evictions_meter.count == 1
    assert shard.total_partitions == 4

    del session2.partition_map[next(iter(session2.partition_map))]
    assert session2.size == 3
    assert session2.cached_size == 4
    shard.touch(session2, session2.last_used_ms)
    assert shard.total_partitions == 3


# ------------------------------------------------------------------------------------------------ contexts


def test_cached_leader_epoch():
    _, manager = single_shard()
    topic_ids = {"foo": new_id(), "bar": new_id()}
    names = {v: k for k, v in topic_ids.items()}
    tp0, tp1, tp2 = tip(topic_ids["foo"], "foo", 0), tip(topic_ids["foo"], "foo", 1), tip(topic_ids["bar"], "bar", 1)

    def leader_epochs(ctx):
        return {tp: d.current_leader_epoch for tp, d in ctx.partitions()}

    request1 = {tp0: PartitionData(0, 0, 100, -1, topic_id=tp0.topic_id),
                tp1: PartitionData(10, 0, 100, 1, topic_id=tp1.topic_id),
                tp2: PartitionData(10, 0, 100, 2, topic_id=tp2.topic_id)}
    context1 = context(manager, INITIAL, request1, names)
    assert leader_epochs(context1) == {tp0: -1, tp1: 1, tp2: 2}

    response = {tp0: resp(100, 100, 100), tp1: resp(10, 10, 10), tp2: resp(5, 5, 5)}
    session_id = context1.update_and_generate_response(0, response).session_id

    # With no changes, the cached epochs should remain the same
    context2 = context(manager, FetchMetadata(session_id, 1), {}, names)
    assert leader_epochs(context2) == {tp0: -1, tp1: 1, tp2: 2}
    context2.update_and_generate_response(0, response)

    # Now verify we can change the leader epoch and the context is updated
    request3 = {tp0: PartitionData(0, 0, 100, 6, topic_id=tp0.topic_id),
                tp1: PartitionData(10, 0, 100, -1, topic_id=tp1.topic_id),
                tp2: PartitionData(10, 0, 100, 3, topic_id=tp2.topic_id)}
    context3 = context(manager, FetchMetadata(session_id, 2), request3, names)
    assert leader_epochs(context3) == {tp0: 6, tp1: -1, tp2: 3}


def test_last_fetched_epoch():
    _, manager = single_shard()
    topic_ids = {"foo": new_id(), "bar": new_id()}
    names = {v: k for k, v in topic_ids.items()}
    tp0, tp1, tp2 = tip(topic_ids["foo"], "foo", 0), tip(topic_ids["foo"], "foo", 1), tip(topic_ids["bar"], "bar", 1)

    def leader_epochs(ctx):
        return {tp: d.current_leader_epoch for tp, d in ctx.partitions()}

    def last_fetched(ctx):
        return {tp: d.last_fetched_epoch for tp, d in ctx.partitions()}

    request1 = {tp0: PartitionData(0, 0, 100, -1, -1, tp0.topic_id),
                tp1: PartitionData(10, 0, 100, 1, -1, tp1.topic_id),
                tp2: PartitionData(10, 0, 100, 2, 1, tp2.topic_id)}
    context1 = context(manager, INITIAL, request1, names)
    assert leader_epochs(context1) == {tp0: -1, tp1: 1, tp2: 2}
    assert last_fetched(context1) == {tp0: -1, tp1: -1, tp2: 1}

    response = {tp0: resp(100, 100, 100), tp1: resp(10, 10, 10), tp2: resp(5, 5, 5)}
    session_id = context1.update_and_generate_response(0, response).session_id

    context2 = context(manager, FetchMetadata(session_id, 1), {}, names)
    assert leader_epochs(context2) == {tp0: -1, tp1: 1, tp2: 2}
    assert last_fetched(context2) == {tp0: -1, tp1: -1, tp2: 1}
    context2.update_and_generate_response(0, response)

    request3 = {tp0: PartitionData(0, 0, 100, 6, 5, tp0.topic_id),
                tp1: PartitionData(10, 0, 100, -1, -1, tp1.topic_id),
                tp2: PartitionData(10, 0, 100, 3, 3, tp2.topic_id)}
    context3 = context(manager, FetchMetadata(session_id, 2), request3, names)
    assert leader_epochs(context3) == {tp0: 6, tp1: -1, tp2: 3}
    # Kafka asserts this on context2: it shares the session, so it sees the update too.
    assert last_fetched(context2) == {tp0: 5, tp1: -1, tp2: 3}


def test_fetch_requests():
    shard, manager = single_shard()
    names = {new_id(): "foo", new_id(): "bar"}
    topic_ids = {v: k for k, v in names.items()}
    tp0, tp1 = tip(topic_ids["foo"], "foo", 0), tip(topic_ids["foo"], "foo", 1)
    tp2, tp3 = tip(topic_ids["bar"], "bar", 0), tip(topic_ids["bar"], "bar", 1)

    # Verify that SESSIONLESS requests get a SessionlessFetchContext
    ctx = context(manager, FetchMetadata.LEGACY, {}, names, follower=True)
    assert isinstance(ctx, SessionlessFetchContext)

    # Create a new fetch session with a FULL fetch request
    req_data2 = {tp0: PartitionData(0, 0, 100, topic_id=tp0.topic_id),
                 tp1: PartitionData(10, 0, 100, topic_id=tp1.topic_id)}
    context2 = context(manager, INITIAL, req_data2, names)
    assert isinstance(context2, FullFetchContext)
    assert [(tp.topic, tp.partition, tp.topic_id, d) for tp, d in context2.partitions()] == \
        [(tp.topic, tp.partition, topic_ids[tp.topic], d) for tp, d in req_data2.items()]
    assert context2.get_fetch_offset(tp0) == 0
    assert context2.get_fetch_offset(tp1) == 10

    resp_data2 = {tp0: resp(100, 100, 100), tp1: resp(10, 10, 10)}
    resp2 = context2.update_and_generate_response(0, resp_data2)
    assert resp2.error_code == NONE
    assert resp2.session_id != INVALID_SESSION_ID
    assert dict(resp2.partitions) == resp_data2

    # Test trying to create a new session with an invalid epoch
    context3 = context(manager, FetchMetadata(resp2.session_id, 5), req_data2, names)
    assert isinstance(context3, SessionErrorContext)
    assert context3.update_and_generate_response(0, resp_data2).error_code == INVALID_FETCH_SESSION_EPOCH

    # Test trying to create a new session with a non-existent session id
    context4 = context(manager, FetchMetadata(resp2.session_id + 1, 1), req_data2, names)
    assert context4.update_and_generate_response(0, resp_data2).error_code == FETCH_SESSION_ID_NOT_FOUND

    # Continue the first fetch session we created.
    context5 = context(manager, FetchMetadata(resp2.session_id, 1), {}, names)
    assert isinstance(context5, IncrementalFetchContext)
    assert [(tp.topic, tp.partition, tp.topic_id, d) for tp, d in context5.partitions()] == \
        [(tp.topic, tp.partition, topic_ids[tp.topic], d) for tp, d in req_data2.items()]
    assert context5.get_fetch_offset(tp1) == 10
    resp5 = context5.update_and_generate_response(0, resp_data2)
    assert resp5.error_code == NONE
    assert resp5.session_id == resp2.session_id
    assert len(resp5.partitions) == 0

    # Test setting an invalid fetch session epoch.
    context6 = context(manager, FetchMetadata(resp2.session_id, 5), req_data2, names)
    assert isinstance(context6, SessionErrorContext)
    assert context6.update_and_generate_response(0, resp_data2).error_code == INVALID_FETCH_SESSION_EPOCH

    # Test generating a throttled response for the incremental fetch session
    context7 = context(manager, FetchMetadata(resp2.session_id, 2), {}, names)
    resp7 = context7.throttled_response(100)
    assert resp7.error_code == NONE
    assert resp7.session_id == resp2.session_id
    assert resp7.throttle_time_ms == 100

    # Close the incremental fetch session.
    prev_session_id = resp5.session_id
    req_data8 = {tp2: PartitionData(0, 0, 100, topic_id=tp2.topic_id),
                 tp3: PartitionData(10, 0, 100, topic_id=tp3.topic_id)}
    context8 = context(manager, FetchMetadata(prev_session_id, FINAL_EPOCH), req_data8, names)
    assert isinstance(context8, SessionlessFetchContext)
    assert shard.size == 0
    resp8 = context8.update_and_generate_response(0, {tp2: resp(100, 100, 100), tp3: resp(100, 100, 100)})
    assert resp8.error_code == NONE
    assert resp8.session_id == INVALID_SESSION_ID != prev_session_id


@pytest.mark.parametrize("uses_topic_ids", [True, False])
def test_incremental_fetch_session(uses_topic_ids):
    _, manager = single_shard()
    names = {new_id(): "foo", new_id(): "bar"} if uses_topic_ids else {}
    topic_ids = {v: k for k, v in names.items()}
    version = LATEST if uses_topic_ids else 12
    foo_id, bar_id = topic_ids.get("foo", ZERO_UUID), topic_ids.get("bar", ZERO_UUID)
    tp0, tp1, tp2 = tip(foo_id, "foo", 0), tip(foo_id, "foo", 1), tip(bar_id, "bar", 0)

    # Create a new fetch session with foo-0 and foo-1
    req_data1 = {tp0: PartitionData(0, 0, 100, topic_id=foo_id), tp1: PartitionData(10, 0, 100, topic_id=foo_id)}
    context1 = context(manager, INITIAL, req_data1, names, version=version)
    assert isinstance(context1, FullFetchContext)
    resp1 = context1.update_and_generate_response(0, {tp0: resp(100, 100, 100), tp1: resp(10, 10, 10)})
    assert resp1.error_code == NONE
    assert resp1.session_id != INVALID_SESSION_ID
    assert len(resp1.partitions) == 2

    # Create an incremental fetch request that removes foo-0 and adds bar-0
    context2 = context(manager, FetchMetadata(resp1.session_id, 1), {tp2: PartitionData(15, 0, 0, topic_id=bar_id)},
                       names, forget=[tp0], version=version)
    assert isinstance(context2, IncrementalFetchContext)
    assert [tp for tp, _ in context2.partitions()] == [tp1, tp2]
    assert context2.get_fetch_offset(tp0) is None
    assert context2.get_fetch_offset(tp1) == 10
    assert context2.get_fetch_offset(tp2) == 15
    assert context2.get_fetch_offset(tip(bar_id, "bar", 2)) is None

    resp2 = context2.update_and_generate_response(0, {tp1: resp(10, 10, 10), tp2: resp(10, 10, 10)})
    assert resp2.error_code == NONE
    assert len(resp2.partitions) == 1        # only bar-0: foo-1's HW and log start offset did not change
    assert resp2.partitions[0][0] == tp2
    assert resp2.session_id > 0


def test_fetch_session_with_unknown_id_old_request_version():
    shard, manager = single_shard()
    names = {new_id(): "foo", new_id(): "bar"}
    topic_ids = {v: k for k, v in names.items()}
    tp0, tp1 = tip(topic_ids["foo"], "foo", 0), tip(topic_ids["foo"], "foo", 1)

    req_data1 = {tp0: PartitionData(0, 0, 100, topic_id=tp0.topic_id), tp1: PartitionData(10, 0, 100)}
    # Simulate unknown topic ID for foo; an older request version must not fail.
    context1 = context(manager, INITIAL, req_data1, {topic_ids["bar"]: "bar"}, version=12)
    assert isinstance(context1, FullFetchContext)
    results = {tp: r for (tp, _), r in zip(context1.partitions(), [resp(100, 100, 100), resp(10, 10, 10)])}
    resp1 = context1.update_and_generate_response(0, results)
    assert resp1.error_code == NONE
    assert resp1.session_id != INVALID_SESSION_ID
    assert {(tp.topic, tp.partition) for tp, _ in resp1.partitions} == {("foo", 0), ("foo", 1)}
    assert all(r.error_code == NONE for _, r in resp1.partitions)
    assert shard.get(resp1.session_id).uses_topic_ids is False


def test_fetch_session_with_unknown_id():
    _, manager = single_shard()
    foo_id, bar_id, zar_id = new_id(), new_id(), new_id()
    names = {foo_id: "foo", bar_id: "bar", zar_id: "zar"}
    foo0, foo1, zar0 = tip(foo_id, "foo", 0), tip(foo_id, "foo", 1), tip(zar_id, "zar", 0)
    empty_foo0, empty_foo1, empty_zar0 = tip(foo_id, None, 0), tip(foo_id, None, 1), tip(zar_id, None, 0)

    req_data1 = {foo0: PartitionData(0, 0, 100, topic_id=foo_id), foo1: PartitionData(10, 0, 100, topic_id=foo_id),
                 zar0: PartitionData(10, 0, 100, topic_id=zar_id)}
    context1 = context(manager, INITIAL, req_data1, {bar_id: "bar"})
    assert isinstance(context1, FullFetchContext)
    assert order(context1) == ids(empty_foo0, empty_foo1, empty_zar0)

    resp1 = context1.update_and_generate_response(0, {
        empty_foo0: PartitionResult(error_code=UNKNOWN_TOPIC_ID),
        empty_foo1: PartitionResult(error_code=UNKNOWN_TOPIC_ID),
        empty_zar0: PartitionResult(error_code=UNKNOWN_TOPIC_ID)})
    # On the latest request version, we should have unknown topic ID errors.
    assert resp1.error_code == NONE
    assert resp1.session_id != INVALID_SESSION_ID
    assert response_errors(resp1, names) == {("foo", 0): UNKNOWN_TOPIC_ID, ("foo", 1): UNKNOWN_TOPIC_ID,
                                             ("zar", 0): UNKNOWN_TOPIC_ID}

    # Create an incremental request where we resolve the partitions
    context2 = context(manager, FetchMetadata(resp1.session_id, 1), {}, {foo_id: "foo", bar_id: "bar"})
    assert isinstance(context2, IncrementalFetchContext)
    # Topic names in the session but not in the request are lazily resolved via foreachPartition.
    assert order(context2) == ids(foo0, foo1, empty_zar0)

    resp2 = context2.update_and_generate_response(0, {
        foo0: resp(100, 100, 100), foo1: resp(10, 10, 10), empty_zar0: PartitionResult(error_code=UNKNOWN_TOPIC_ID)})
    assert resp2.error_code == NONE
    assert resp2.session_id != INVALID_SESSION_ID
    assert len(resp2.partitions) == 3
    assert response_errors(resp2, names) == {("foo", 0): NONE, ("foo", 1): NONE, ("zar", 0): UNKNOWN_TOPIC_ID}


def test_incremental_fetch_session_with_ids_when_session_does_not_use_ids():
    _, manager = single_shard()
    names: dict[uuid.UUID, str] = {}
    foo0 = tip(ZERO_UUID, "foo", 0)
    # Start a fetch session using a request version that does not use topic IDs.
    context1 = context(manager, INITIAL, {foo0: PartitionData(0, 0, 100)}, names, version=12)
    assert isinstance(context1, FullFetchContext)
    resp1 = context1.update_and_generate_response(0, {foo0: resp(100, 100, 100)})
    assert resp1.error_code == NONE
    assert resp1.session_id != INVALID_SESSION_ID

    # An incremental request as though no topics changed, but at v13+; the broker now knows foo's id.
    names[new_id()] = "foo"
    context2 = context(manager, FetchMetadata(resp1.session_id, 1), {}, names)
    assert isinstance(context2, SessionErrorContext)
    assert context2.update_and_generate_response(0, {}).error_code == FETCH_SESSION_TOPIC_ID_ERROR


def test_incremental_fetch_session_without_ids_when_session_uses_ids():
    _, manager = single_shard()
    foo_id = new_id()
    names = {foo_id: "foo"}
    foo0 = tip(foo_id, "foo", 0)
    context1 = context(manager, INITIAL, {foo0: PartitionData(0, 0, 100, topic_id=foo_id)}, names)
    assert isinstance(context1, FullFetchContext)
    resp1 = context1.update_and_generate_response(0, {foo0: resp(100, 100, 100)})
    assert resp1.error_code == NONE
    assert resp1.session_id != INVALID_SESSION_ID

    # An incremental request as though no topics changed, but at v12; the id is no longer known.
    del names[foo_id]
    context2 = context(manager, FetchMetadata(resp1.session_id, 1), {}, names, version=12)
    assert isinstance(context2, SessionErrorContext)
    assert context2.update_and_generate_response(0, {}).error_code == FETCH_SESSION_TOPIC_ID_ERROR


def test_fetch_session_update_topic_ids_broker_side():
    _, manager = single_shard()
    names = {new_id(): "foo", new_id(): "bar"}
    topic_ids = {v: k for k, v in names.items()}
    tp0, tp1 = tip(topic_ids["foo"], "foo", 0), tip(topic_ids["bar"], "bar", 1)

    # Start a fetch session. Simulate unknown partition foo-0 (erroneous partitions come last).
    context1 = context(manager, INITIAL, {tp0: PartitionData(0, 0, 100, topic_id=tp0.topic_id),
                                          tp1: PartitionData(10, 0, 100, topic_id=tp1.topic_id)}, names)
    assert isinstance(context1, FullFetchContext)
    resp1 = context1.update_and_generate_response(0, {tp1: resp(10, 10, 10),
                                                      tp0: error_response(UNKNOWN_TOPIC_OR_PARTITION)})
    assert resp1.error_code == NONE
    assert resp1.session_id != INVALID_SESSION_ID
    assert len(resp1.partitions) == 2

    # Simulate the id changing on the server (topic deleted and recreated).
    names_foo_changed = {topic_ids["bar"]: "bar", new_id(): "foo"}
    context2 = context(manager, FetchMetadata(resp1.session_id, 1), {}, names_foo_changed)
    assert isinstance(context2, IncrementalFetchContext)
    # The log check finds an inconsistent id.
    resp2 = context2.update_and_generate_response(0, {tp0: error_response(INCONSISTENT_TOPIC_ID)})
    assert resp2.error_code == NONE
    assert resp2.session_id > 0
    assert response_errors(resp2, names)[("foo", 0)] == INCONSISTENT_TOPIC_ID


def test_resolve_unknown_partitions():
    _, manager = single_shard()
    foo, bar, zar = tip(new_id(), "foo", 0), tip(new_id(), "bar", 0), tip(new_id(), "zar", 0)
    foo_u, bar_u, zar_u = (tip(t.topic_id, None, t.partition) for t in (foo, bar, zar))

    # The metadata cache does not know about the topic, so the context contains unresolved partitions.
    context1 = simple_context(manager, INITIAL, [foo, bar, zar], {})
    assert isinstance(context1, FullFetchContext)
    assert order(context1) == ids(foo_u, bar_u, zar_u)
    session_id = session_id_of(context1)

    # The metadata cache only knows about foo.
    context2 = simple_context(manager, FetchMetadata(session_id, 1), [], {foo.topic_id: foo.topic})
    assert isinstance(context2, IncrementalFetchContext)
    assert order(context2) == ids(foo, bar_u, zar_u)
    session_id_of(context2)

    # The metadata cache knows about foo and bar.
    context3 = simple_context(manager, FetchMetadata(session_id, 2), [bar],
                              {foo.topic_id: foo.topic, bar.topic_id: bar.topic})
    assert isinstance(context3, IncrementalFetchContext)
    assert order(context3) == ids(foo, bar, zar_u)
    session_id_of(context3)

    # The metadata cache knows about all topics.
    context4 = simple_context(manager, FetchMetadata(session_id, 3), [],
                              {foo.topic_id: foo.topic, bar.topic_id: bar.topic, zar.topic_id: zar.topic})
    assert isinstance(context4, IncrementalFetchContext)
    assert order(context4) == ids(foo, bar, zar)
    session_id_of(context4)

    # The metadata cache does not know about the topics anymore (e.g. deleted): all topics remain resolved.
    context5 = simple_context(manager, FetchMetadata(session_id, 4), [], {})
    assert isinstance(context5, IncrementalFetchContext)
    assert order(context5) == ids(foo, bar, zar)


@pytest.mark.parametrize("foo_starts_resolved,foo_ends_resolved",
                         [(True, True), (True, False), (False, True), (False, False)])
def test_to_forget_partitions(foo_starts_resolved, foo_ends_resolved):
    _, manager = single_shard()
    foo, bar = tip(new_id(), "foo", 0), tip(new_id(), "bar", 0)
    foo_u, bar_u = tip(foo.topic_id, None, 0), tip(bar.topic_id, None, 0)

    # foo's resolution depends on foo_starts_resolved; bar is unresolved.
    names1 = {foo.topic_id: foo.topic} if foo_starts_resolved else {}
    foo_context1 = foo if foo_starts_resolved else foo_u
    context1 = simple_context(manager, INITIAL, [foo_context1, bar], names1)
    assert isinstance(context1, FullFetchContext)
    assert order(context1) == ids(foo_context1, bar_u)
    session_id = session_id_of(context1)

    # Forget foo, keep bar.
    names2 = {foo.topic_id: foo.topic} if foo_ends_resolved else {}
    foo_context2 = foo if foo_ends_resolved else foo_u
    context2 = simple_context(manager, FetchMetadata(session_id, 1), [], names2, forget=[foo_context2])
    assert isinstance(context2, IncrementalFetchContext)
    assert order(context2) == ids(bar_u)
    session_id_of(context2)

    # Now remove bar: the context is sessionless since the session is empty.
    context3 = simple_context(manager, FetchMetadata(session_id, 2), [], {}, forget=[bar])
    assert isinstance(context3, SessionlessFetchContext)
    assert order(context3) == []


def test_update_and_generate_response_data():
    _, manager = single_shard()
    foo, bar = tip(new_id(), "foo", 0), tip(new_id(), "bar", 0)
    # Foo is always resolved and bar never on the receiving broker; the sender knows both.
    receiving = {foo.topic_id: foo.topic}
    sending = {foo.topic_id: foo.topic, bar.topic_id: bar.topic}
    expected = {("foo", 0): UNKNOWN_TOPIC_OR_PARTITION, ("bar", 0): UNKNOWN_TOPIC_ID}

    context1 = simple_context(manager, FetchMetadata.LEGACY, [foo, bar], receiving)
    assert isinstance(context1, SessionlessFetchContext)
    assert response_errors(respond_with_errors(context1), sending) == expected

    context2 = simple_context(manager, INITIAL, [foo, bar], receiving)
    assert isinstance(context2, FullFetchContext)
    response2 = respond_with_errors(context2)
    session_id = response2.session_id
    assert response_errors(response2, sending) == expected

    # An incremental context: both partitions have errors, so both stay in the response.
    context3 = simple_context(manager, FetchMetadata(session_id, 1), [], receiving)
    assert isinstance(context3, IncrementalFetchContext)
    assert response_errors(respond_with_errors(context3), sending) == expected

    # Finally create an error context by using the same epoch: the response is empty.
    context4 = simple_context(manager, FetchMetadata(session_id, 1), [], receiving)
    assert isinstance(context4, SessionErrorContext)
    assert respond_with_errors(context4).partitions == ()


def two_partition_full(manager, names, foo_id, now, follower=False):
    foo0, foo1 = tip(foo_id, "foo", 0), tip(foo_id, "foo", 1)
    ctx = context(manager, INITIAL, {foo0: PartitionData(0, 0, 100, topic_id=foo_id),
                                     foo1: PartitionData(10, 0, 100, topic_id=foo_id)},
                  names, follower=follower, now=now)
    assert isinstance(ctx, FullFetchContext)
    return ctx, {foo0: resp(100, 100, 100), foo1: resp(10, 10, 10)}


def test_fetch_session_expiration():
    # Maximum entries 2 to allow for eviction later.
    shard, manager = single_shard(2, 1000)
    foo_id = new_id()
    names = {foo_id: "foo"}

    ctx1, data = two_partition_full(manager, names, foo_id, 0)
    session1 = ctx1.update_and_generate_response(0, data)
    assert session1.error_code == NONE and session1.session_id != INVALID_SESSION_ID
    assert len(session1.partitions) == 2
    assert shard.get(session1.session_id) is not None

    ctx2, data = two_partition_full(manager, names, foo_id, 500)
    session2 = ctx2.update_and_generate_response(500, data)
    assert session2.error_code == NONE and session2.session_id != INVALID_SESSION_ID
    assert shard.get(session1.session_id) is not None
    assert shard.get(session2.session_id) is not None

    # An incremental fetch request for session 1 touches it.
    ctx1v2 = context(manager, FetchMetadata(session1.session_id, 1), {}, names, now=1000)
    assert isinstance(ctx1v2, IncrementalFetchContext)

    # Session 1 would be evicted now if it had not been touched; session 2 is the LRU entry.
    ctx3, data = two_partition_full(manager, names, foo_id, 1501)
    session3 = ctx3.update_and_generate_response(1501, data)
    assert session3.error_code == NONE and session3.session_id != INVALID_SESSION_ID
    assert len(session3.partitions) == 2
    assert shard.get(session1.session_id) is not None
    assert shard.get(session2.session_id) is None, \
        "session 2 should have been evicted by latest session, as session 1 was used more recently"
    assert shard.get(session3.session_id) is not None


def test_privileged_session_handling():
    shard, manager = single_shard(2, 1000)
    foo_id = new_id()
    names = {foo_id: "foo"}

    ctx1, data = two_partition_full(manager, names, foo_id, 0, follower=True)
    session1 = ctx1.update_and_generate_response(0, data)
    assert session1.session_id != INVALID_SESSION_ID
    assert shard.size == 1

    ctx2, data = two_partition_full(manager, names, foo_id, 500)
    session2 = ctx2.update_and_generate_response(500, data)
    assert session2.session_id != INVALID_SESSION_ID
    assert shard.get(session1.session_id) is not None and shard.get(session2.session_id) is not None
    assert shard.size == 2

    # Session 1 is privileged, so privileged session 3 evicts the unprivileged, not-yet-stale session 2.
    ctx3, data = two_partition_full(manager, names, foo_id, 1000, follower=True)
    session3 = ctx3.update_and_generate_response(1000, data)
    assert session3.session_id != INVALID_SESSION_ID
    assert shard.get(session1.session_id) is not None
    assert shard.get(session2.session_id) is None, "session 2 should have been evicted by session 3"
    assert shard.get(session3.session_id) is not None
    assert shard.size == 2

    # Session 1 is evicted by age even though it is privileged (Kafka reuses session 3's context here).
    session4 = ctx3.update_and_generate_response(1501, data)
    assert session4.session_id != INVALID_SESSION_ID
    assert shard.get(session1.session_id) is None, \
        "session 1 should have been evicted by session 4 even though it is privileged as it has hit eviction time"
    assert shard.get(session3.session_id) is not None
    assert shard.get(session4.session_id) is not None
    assert shard.size == 2


def test_zero_size_fetch_session():
    shard, manager = single_shard()
    foo_id = new_id()
    names = {foo_id: "foo"}
    ctx1, data = two_partition_full(manager, names, foo_id, 0)
    resp1 = ctx1.update_and_generate_response(0, data)
    assert resp1.error_code == NONE and resp1.session_id != INVALID_SESSION_ID
    assert len(resp1.partitions) == 2

    # An incremental fetch request that removes foo-0 and foo-1 closes the session.
    context2 = context(manager, FetchMetadata(resp1.session_id, 1), {}, names,
                       forget=[tip(foo_id, "foo", 0), tip(foo_id, "foo", 1)])
    assert isinstance(context2, SessionlessFetchContext)
    resp2 = context2.update_and_generate_response(0, {})
    assert resp2.session_id == INVALID_SESSION_ID
    assert resp2.partitions == ()
    assert shard.size == 0


def test_diverging_epoch():
    _, manager = single_shard()
    names = {new_id(): "foo", new_id(): "bar"}
    topic_ids = {v: k for k, v in names.items()}
    tp1, tp2 = tip(topic_ids["foo"], "foo", 1), tip(topic_ids["bar"], "bar", 2)
    req_data = {tp1: PartitionData(100, 0, 1000, 5, 4, tp1.topic_id), tp2: PartitionData(100, 0, 1000, 5, 4, tp2.topic_id)}

    # Full fetch context returns all partitions in the response
    context1 = context(manager, INITIAL, req_data, names)
    assert isinstance(context1, FullFetchContext)
    resp_data = {tp1: resp(105, 105, 0), tp2: resp(105, 105, 0, diverging_epoch=3)}
    resp1 = context1.update_and_generate_response(0, resp_data)
    assert resp1.error_code == NONE
    assert resp1.session_id != INVALID_SESSION_ID
    assert {tp for tp, _ in resp1.partitions} == {tp1, tp2}

    # Incremental fetch context returns partitions with divergent epoch even if nothing else changed.
    context2 = context(manager, FetchMetadata(resp1.session_id, 1), req_data, names)
    assert isinstance(context2, IncrementalFetchContext)
    resp2 = context2.update_and_generate_response(0, resp_data)
    assert resp2.error_code == NONE
    assert resp2.session_id == resp1.session_id
    assert {tp for tp, _ in resp2.partitions} == {tp2}

    # All partitions with divergent epoch should be returned.
    resp_data[tp1] = resp(105, 105, 0, diverging_epoch=3)
    resp3 = context2.update_and_generate_response(0, resp_data)
    assert resp3.error_code == NONE and resp3.session_id == resp1.session_id
    assert {tp for tp, _ in resp3.partitions} == {tp1, tp2}

    # Partitions that meet other conditions are returned whether or not divergingEpoch is set.
    resp_data[tp1] = resp(110, 110, 0)
    resp4 = context2.update_and_generate_response(0, resp_data)
    assert resp4.error_code == NONE and resp4.session_id == resp1.session_id
    assert {tp for tp, _ in resp4.partitions} == {tp1, tp2}


def test_deprioritizes_partitions_with_records_only():
    _, manager = single_shard()
    topic_ids = {"foo": new_id(), "bar": new_id(), "zar": new_id()}
    names = {v: k for k, v in topic_ids.items()}
    tp1, tp2, tp3 = tip(topic_ids["foo"], "foo", 1), tip(topic_ids["bar"], "bar", 2), tip(topic_ids["zar"], "zar", 3)
    req_data = {tp: PartitionData(100, 0, 1000, 5, 4, tp.topic_id) for tp in (tp1, tp2, tp3)}

    context1 = manager.new_context(0, LATEST, INITIAL, False, req_data, [], names)
    assert isinstance(context1, FullFetchContext)
    resp1 = context1.update_and_generate_response(0, {tp: resp(50, 50, 0) for tp in (tp1, tp2, tp3)})
    assert resp1.error_code == NONE
    assert resp1.session_id != INVALID_SESSION_ID
    assert {tp for tp, _ in resp1.partitions} == {tp1, tp2, tp3}

    context2 = manager.new_context(0, LATEST, FetchMetadata(resp1.session_id, 1), False, req_data, [], names)
    assert isinstance(context2, IncrementalFetchContext)
    # Partitions are ordered in the session as per last response
    assert order(context2) == ids(tp1, tp2, tp3)

    # Response is empty
    resp2 = context2.update_and_generate_response(0, {})
    assert resp2.error_code == NONE and resp2.session_id == resp1.session_id
    assert resp2.partitions == ()

    # All partitions with changes should be returned.
    resp3 = context2.update_and_generate_response(0, {
        tp1: resp(60, 50, 0), tp2: resp(60, 50, 0, records_size=68), tp3: resp(50, 50, 0)})
    assert resp3.error_code == NONE and resp3.session_id == resp1.session_id
    assert {tp for tp, _ in resp3.partitions} == {tp1, tp2}

    # Only the partitions whose returned records in the last response were deprioritized
    assert order(context2) == ids(tp1, tp3, tp2)


def test_cached_partition_equals_and_hash_code():
    topic_id = new_id()
    with_id_and_name = CachedPartition(tip(topic_id, "topic", 0))
    with_id_and_no_name = CachedPartition(tip(topic_id, None, 0))
    with_different_id_and_name = CachedPartition(tip(new_id(), "topic", 0))
    with_zero_id_and_name = CachedPartition(tip(ZERO_UUID, "topic", 0))
    with_zero_id_and_other_name = CachedPartition(tip(ZERO_UUID, "otherTopic", 0))

    # CachedPartitions with valid topic IDs compare topic ID and partition but not topic name.
    assert with_id_and_name == with_id_and_no_name
    assert hash(with_id_and_name) == hash(with_id_and_no_name)
    assert with_id_and_name != with_different_id_and_name
    assert hash(with_id_and_name) != hash(with_different_id_and_name)
    assert with_id_and_name != with_zero_id_and_name
    assert hash(with_id_and_name) != hash(with_zero_id_and_name)

    # CachedPartitions with a null name and valid IDs act just like ones with valid names
    assert with_id_and_no_name == with_id_and_name
    assert hash(with_id_and_no_name) == hash(with_id_and_name)
    assert with_id_and_no_name != with_different_id_and_name
    assert hash(with_id_and_no_name) != hash(with_different_id_and_name)
    assert with_id_and_no_name != with_zero_id_and_name
    assert hash(with_id_and_no_name) != hash(with_zero_id_and_name)

    # CachedPartitions with zero Uuids compare topic name and partition.
    assert with_zero_id_and_name != with_zero_id_and_other_name
    assert hash(with_zero_id_and_name) != hash(with_zero_id_and_other_name)
    assert with_zero_id_and_name == with_zero_id_and_name
    assert hash(with_zero_id_and_name) == hash(with_zero_id_and_name)

    # The same rule holds for the TopicIdPartition keys the sessions are indexed by.
    assert tip(topic_id, "topic", 0) == tip(topic_id, None, 0)
    assert tip(ZERO_UUID, "topic", 0) != tip(ZERO_UUID, "otherTopic", 0)
    assert tip(topic_id, "topic", 0) != tip(topic_id, "topic", 1)


def test_maybe_resolve_unknown_name():
    named = CachedPartition(tip(new_id(), "topic", 0))
    null_name1 = CachedPartition(tip(new_id(), None, 0))
    null_name2 = CachedPartition(tip(new_id(), None, 0))
    topic_names = {named.topic_id: "foo", null_name1.topic_id: "bar"}

    # The name is not null: it is not changed (an id never maps to two names; this tests the null check).
    named.maybe_resolve_unknown_name(topic_names)
    assert named.topic == "topic"
    # Resolved: in the map and currently null.
    null_name1.maybe_resolve_unknown_name(topic_names)
    assert null_name1.topic == "bar"
    assert null_name1.tip.topic == "bar"
    # Not in the map: stays unresolved.
    null_name2.maybe_resolve_unknown_name(topic_names)
    assert null_name2.topic is None


# ------------------------------------------------------------------------------------------------ sharding


def eight_shards() -> FetchSessionCache:
    """8 shards of 10 entries, evictionMs 1000, range = Int.MaxValue / 8."""
    return FetchSessionCache(max_slots=80, shards=8, eviction_ms=1000, rng=random.Random(3))


def test_fetch_session_cache_get_sharded_cache_retrieves_cache_from_correct_segment():
    cache = eight_shards()
    session_id_range = MAX_INT // 8
    assert cache.get_cache_shard(session_id_range - 1) is cache.shards[0]
    assert cache.get_cache_shard(session_id_range) is cache.shards[1]
    assert cache.get_cache_shard(session_id_range * 2) is cache.shards[2]
    with pytest.raises(SessionIdOutOfRange):
        cache.get_cache_shard(session_id_range * 8)
    with pytest.raises(IndexError):           # the JVM's IndexOutOfBoundsException
        cache.get_cache_shard(session_id_range * 8)


def test_fetch_session_cache_round_robins_into_shards():
    cache = eight_shards()
    for shard_num in range(16):
        assert cache.get_next_cache_shard() is cache.shards[shard_num % 8]


def test_fetch_session_cache_round_robins_into_shards_when_integer_overflows():
    cache = eight_shards()
    cache.counter = -(2**31)                  # COUNTER.set(Integer.MAX_VALUE + 1)
    for shard_num in range(16):
        assert cache.get_next_cache_shard() is cache.shards[shard_num % 8]
