"""Kafka's client FetchSessionHandlerTest (clients/src/test/java/org/apache/kafka/clients/FetchSessionHandlerTest.java),
scenario by scenario, same names and assertions, run against fetchtool.sessions.FetchSessionHandler.

A response is given to the handler the way Kafka's FetchResponse presents it: the partitions of
responseData(sessionTopicNames, version) and the set of topic ids the response carries.
"""

from __future__ import annotations

import random
import uuid

import pytest

from fetchtool.sessions import (
    FETCH_SESSION_ID_NOT_FOUND, INITIAL_EPOCH, INVALID_FETCH_SESSION_EPOCH, INVALID_SESSION_ID, NONE,
    UNKNOWN_TOPIC_ID, ZERO_UUID, BuilderAlreadyBuilt, FetchMetadata, FetchSessionHandler, PartitionData,
    TopicIdPartition, TopicPartition, find_missing, next_epoch,
)

LATEST = 17
RNG = random.Random(12)


def new_id() -> uuid.UUID:
    return uuid.UUID(int=RNG.getrandbits(128))


def pd(topic_id: uuid.UUID, fetch_offset: int, log_start_offset: int, max_bytes: int) -> PartitionData:
    """new FetchRequest.PartitionData(topicId, fetchOffset, logStartOffset, maxBytes, Optional.empty())."""
    return PartitionData(fetch_offset, log_start_offset, max_bytes, topic_id=topic_id)


def req_map(*entries: tuple[str, uuid.UUID, int, int, int, int]) -> dict[TopicPartition, PartitionData]:
    """reqMap(new ReqEntry(topic, topicId, partition, fetchOffset, logStartOffset, maxBytes), ...)."""
    return {TopicPartition(t, p): pd(tid, fo, lso, mb) for t, tid, p, fo, lso, mb in entries}


def assert_maps_equal(expected: dict, *actuals: dict) -> None:
    """assertMapsEqual: same entries in the same order."""
    for actual in actuals:
        assert list(actual.items()) == list(expected.items())


def respond(handler: FetchSessionHandler, error: int, session_id: int,
            entries: list[tuple[str, int, uuid.UUID]], version: int, throttle_ms: int = 0) -> bool:
    """handler.handleResponse(FetchResponse.of(error, throttle, sessionId, respMap(entries...)), version)."""
    topics = [(name, topic_id, [partition]) for name, partition, topic_id in entries]
    partitions = handler.resolve_response_partitions(topics, version)
    return handler.handle_response(error, session_id, throttle_ms, partitions, {tid for _, _, tid in entries},
                                   version)


def add_topic_id(topic_ids: dict, topic_names: dict, name: str, version: int) -> None:
    if version >= 13:
        tid = new_id()
        topic_ids[name] = tid
        topic_names[tid] = name


def test_find_missing():
    foo0, foo1 = TopicPartition("foo", 0), TopicPartition("foo", 1)
    bar0, bar1 = TopicPartition("bar", 0), TopicPartition("bar", 1)
    baz0, baz1 = TopicPartition("baz", 0), TopicPartition("baz", 1)
    assert set(find_missing({foo0}, {foo0})) == set()
    assert set(find_missing({foo0}, {foo1})) == {foo0}
    assert set(find_missing({foo0, foo1}, {baz0})) == {foo0, foo1}
    assert set(find_missing({foo0, foo1, bar0, bar1}, {bar0, baz0, baz1})) == {bar1, foo0, foo1}
    assert set(find_missing({foo0, foo1, bar0, bar1, baz1}, {foo0, foo1, bar0, bar1, baz0, baz1})) == set()


@pytest.mark.parametrize("version", [12, LATEST])
def test_sessionless(version):
    topic_ids: dict = {}
    topic_names: dict = {}
    handler = FetchSessionHandler(1)
    builder = handler.new_builder()
    add_topic_id(topic_ids, topic_names, "foo", version)
    foo_id = topic_ids.get("foo", ZERO_UUID)
    builder.add(TopicPartition("foo", 0), pd(foo_id, 0, 100, 200))
    builder.add(TopicPartition("foo", 1), pd(foo_id, 10, 110, 210))
    data = builder.build()
    assert_maps_equal(req_map(("foo", foo_id, 0, 0, 100, 200), ("foo", foo_id, 1, 10, 110, 210)),
                      data.to_send, data.session_partitions)
    assert data.metadata.session_id == INVALID_SESSION_ID
    assert data.metadata.epoch == INITIAL_EPOCH

    assert respond(handler, NONE, INVALID_SESSION_ID, [("foo", 0, foo_id), ("foo", 1, foo_id)], version)

    builder2 = handler.new_builder()
    builder2.add(TopicPartition("foo", 0), pd(foo_id, 0, 100, 200))
    data2 = builder2.build()
    assert data2.metadata.session_id == INVALID_SESSION_ID
    assert data2.metadata.epoch == INITIAL_EPOCH
    assert_maps_equal(req_map(("foo", foo_id, 0, 0, 100, 200)), data2.to_send, data2.session_partitions)


@pytest.mark.parametrize("version", [12, LATEST])
def test_incrementals(version):
    topic_ids: dict = {}
    topic_names: dict = {}
    handler = FetchSessionHandler(1)
    builder = handler.new_builder()
    add_topic_id(topic_ids, topic_names, "foo", version)
    foo_id = topic_ids.get("foo", ZERO_UUID)
    builder.add(TopicPartition("foo", 0), pd(foo_id, 0, 100, 200))
    builder.add(TopicPartition("foo", 1), pd(foo_id, 10, 110, 210))
    data = builder.build()
    assert_maps_equal(req_map(("foo", foo_id, 0, 0, 100, 200), ("foo", foo_id, 1, 10, 110, 210)),
                      data.to_send, data.session_partitions)
    assert data.metadata.session_id == INVALID_SESSION_ID
    assert data.metadata.epoch == INITIAL_EPOCH

    assert respond(handler, NONE, 123, [("foo", 0, foo_id), ("foo", 1, foo_id)], version)

    # An incremental fetch request which adds one partition and modifies another.
    builder2 = handler.new_builder()
    add_topic_id(topic_ids, topic_names, "bar", version)
    bar_id = topic_ids.get("bar", ZERO_UUID)
    builder2.add(TopicPartition("foo", 0), pd(foo_id, 0, 100, 200))
    builder2.add(TopicPartition("foo", 1), pd(foo_id, 10, 120, 210))
    builder2.add(TopicPartition("bar", 0), pd(bar_id, 20, 200, 200))
    data2 = builder2.build()
    assert not data2.metadata.is_full
    assert data2.metadata == FetchMetadata(123, 1)
    assert_maps_equal(req_map(("foo", foo_id, 0, 0, 100, 200), ("foo", foo_id, 1, 10, 120, 210),
                              ("bar", bar_id, 0, 20, 200, 200)), data2.session_partitions)
    assert_maps_equal(req_map(("bar", bar_id, 0, 20, 200, 200), ("foo", foo_id, 1, 10, 120, 210)), data2.to_send)

    assert respond(handler, NONE, 123, [("foo", 1, foo_id)], version)

    # Skip building a new request: an INVALID_FETCH_SESSION_EPOCH response leads to a request closing the session.
    assert not respond(handler, INVALID_FETCH_SESSION_EPOCH, INVALID_SESSION_ID, [], version)

    builder4 = handler.new_builder()
    builder4.add(TopicPartition("foo", 0), pd(foo_id, 0, 100, 200))
    builder4.add(TopicPartition("foo", 1), pd(foo_id, 10, 120, 210))
    builder4.add(TopicPartition("bar", 0), pd(bar_id, 20, 200, 200))
    data4 = builder4.build()
    assert data4.metadata.is_full
    assert data4.metadata.session_id == data2.metadata.session_id
    assert data4.metadata.epoch == INITIAL_EPOCH
    assert_maps_equal(req_map(("foo", foo_id, 0, 0, 100, 200), ("foo", foo_id, 1, 10, 120, 210),
                              ("bar", bar_id, 0, 20, 200, 200)), data4.session_partitions, data4.to_send)


def test_double_build():
    handler = FetchSessionHandler(1)
    builder = handler.new_builder()
    builder.add(TopicPartition("foo", 0), pd(new_id(), 0, 100, 200))
    builder.build()
    with pytest.raises(BuilderAlreadyBuilt):
        builder.build()


@pytest.mark.parametrize("version", [12, LATEST])
def test_incremental_partition_removal(version):
    topic_ids: dict = {}
    topic_names: dict = {}
    handler = FetchSessionHandler(1)
    builder = handler.new_builder()
    add_topic_id(topic_ids, topic_names, "foo", version)
    add_topic_id(topic_ids, topic_names, "bar", version)
    foo_id, bar_id = topic_ids.get("foo", ZERO_UUID), topic_ids.get("bar", ZERO_UUID)
    builder.add(TopicPartition("foo", 0), pd(foo_id, 0, 100, 200))
    builder.add(TopicPartition("foo", 1), pd(foo_id, 10, 110, 210))
    builder.add(TopicPartition("bar", 0), pd(bar_id, 20, 120, 220))
    data = builder.build()
    assert_maps_equal(req_map(("foo", foo_id, 0, 0, 100, 200), ("foo", foo_id, 1, 10, 110, 210),
                              ("bar", bar_id, 0, 20, 120, 220)), data.to_send, data.session_partitions)
    assert data.metadata.is_full

    assert respond(handler, NONE, 123, [("foo", 0, foo_id), ("foo", 1, foo_id), ("bar", 0, bar_id)], version)

    # An incremental fetch request which removes two partitions.
    builder2 = handler.new_builder()
    builder2.add(TopicPartition("foo", 1), pd(foo_id, 10, 110, 210))
    data2 = builder2.build()
    assert not data2.metadata.is_full
    assert data2.metadata.session_id == 123
    assert data2.metadata.epoch == 1
    assert_maps_equal(req_map(("foo", foo_id, 1, 10, 110, 210)), data2.session_partitions)
    assert_maps_equal({}, data2.to_send)
    assert set(data2.to_forget) == {TopicIdPartition(foo_id, "foo", 0), TopicIdPartition(bar_id, "bar", 0)}
    assert {(tp.topic, tp.partition) for tp in data2.to_forget} == {("foo", 0), ("bar", 0)}

    # A FETCH_SESSION_ID_NOT_FOUND response makes the next request a session-establishing FULL request.
    assert not respond(handler, FETCH_SESSION_ID_NOT_FOUND, INVALID_SESSION_ID, [], version)
    builder3 = handler.new_builder()
    builder3.add(TopicPartition("foo", 0), pd(foo_id, 0, 100, 200))
    data3 = builder3.build()
    assert data3.metadata.is_full
    assert data3.metadata.session_id == INVALID_SESSION_ID
    assert data3.metadata.epoch == INITIAL_EPOCH
    assert_maps_equal(req_map(("foo", foo_id, 0, 0, 100, 200)), data3.session_partitions, data3.to_send)


@pytest.mark.parametrize("partition", [0, 1], ids=["updating a partition", "adding a new partition"])
def test_topic_id_usage_granted_on_id_upgrade(partition):
    handler = FetchSessionHandler(1)
    builder = handler.new_builder()
    builder.add(TopicPartition("foo", 0), pd(ZERO_UUID, 0, 100, 200))
    data = builder.build()
    assert_maps_equal(req_map(("foo", ZERO_UUID, 0, 0, 100, 200)), data.to_send, data.session_partitions)
    assert data.metadata.is_full
    assert not data.can_use_topic_ids
    assert data.max_version() == 12

    respond(handler, NONE, 123, [("foo", 0, ZERO_UUID)], 12)

    # Add a topic ID to an already existing partition (0) or a new partition (1) in the session.
    builder2 = handler.new_builder()
    builder2.add(TopicPartition("foo", partition), pd(new_id(), 10, 110, 210))
    data2 = builder2.build()
    # Same session, next epoch; ids usable only if the existing partition was updated (the broker closes it).
    assert data2.metadata.session_id == 123
    assert data2.metadata.epoch == 1
    assert data2.can_use_topic_ids == (partition == 0)


@pytest.mark.parametrize("partition", [0, 1], ids=["updating a partition", "adding a new partition"])
def test_id_usage_revoked_on_id_downgrade(partition):
    foo_id = new_id()
    handler = FetchSessionHandler(1)
    builder = handler.new_builder()
    builder.add(TopicPartition("foo", 0), pd(foo_id, 0, 100, 200))
    data = builder.build()
    assert_maps_equal(req_map(("foo", foo_id, 0, 0, 100, 200)), data.to_send, data.session_partitions)
    assert data.metadata.is_full
    assert data.can_use_topic_ids
    assert data.max_version() == LATEST

    respond(handler, NONE, 123, [("foo", 0, foo_id)], LATEST)

    # Remove the topic ID from the existing partition (0) or add a new partition (1) without an ID.
    builder2 = handler.new_builder()
    builder2.add(TopicPartition("foo", partition), pd(ZERO_UUID, 10, 110, 210))
    data2 = builder2.build()
    assert data2.metadata.session_id == 123
    assert data2.metadata.epoch == 1
    assert not data2.can_use_topic_ids
    assert data2.max_version() == 12


@pytest.mark.parametrize("starts_with_topic_ids,ends_with_topic_ids",
                         [(True, True), (True, False), (False, True), (False, False)])
def test_topic_id_replaced(starts_with_topic_ids, ends_with_topic_ids):
    tp = TopicPartition("foo", 0)
    handler = FetchSessionHandler(1)
    builder = handler.new_builder()
    topic_id1 = new_id() if starts_with_topic_ids else ZERO_UUID
    builder.add(tp, pd(topic_id1, 0, 100, 200))
    data = builder.build()
    assert_maps_equal(req_map(("foo", topic_id1, 0, 0, 100, 200)), data.to_send, data.session_partitions)
    assert data.metadata.is_full
    assert data.can_use_topic_ids == starts_with_topic_ids

    respond(handler, NONE, 123, [("foo", 0, topic_id1)], LATEST if starts_with_topic_ids else 12)

    # Try to add a new topic ID, same data otherwise.
    builder2 = handler.new_builder()
    topic_id2 = new_id() if ends_with_topic_ids else ZERO_UUID
    builder2.add(tp, pd(topic_id2, 0, 100, 200))
    data2 = builder2.build()

    if starts_with_topic_ids and ends_with_topic_ids:
        # The old topic ID partition is in toReplace, the new one in toSend.
        assert data2.to_replace == [TopicIdPartition(topic_id1, "foo", 0)]
        assert data2.to_replace[0].topic_id == topic_id1
        assert_maps_equal(req_map(("foo", topic_id2, 0, 0, 100, 200)), data2.to_send, data2.session_partitions)
        assert handler.session_topic_names == {topic_id2: "foo"}
        # The old partition is forgotten only from v13 on, so a v12 request does not drop the new one.
        assert data2.forgotten_for_version(13) == [TopicIdPartition(topic_id1, "foo", 0)]
        assert data2.forgotten_for_version(12) == []
    elif starts_with_topic_ids or ends_with_topic_ids:
        # Up- or downgrade: sent as altered, not replaced; the broker will close the session.
        assert data2.to_replace == []
        assert_maps_equal(req_map(("foo", topic_id2, 0, 0, 100, 200)), data2.to_send, data2.session_partitions)
        assert handler.session_topic_names == ({topic_id2: "foo"} if ends_with_topic_ids else {})
    else:
        # Nothing changed, so nothing to send.
        assert data2.to_replace == []
        assert data2.to_send == {}
        assert_maps_equal(req_map(("foo", topic_id2, 0, 0, 100, 200)), data2.session_partitions)
        assert handler.session_topic_names == {}

    assert data2.metadata.session_id == 123
    assert data2.metadata.epoch == 1
    assert data2.can_use_topic_ids == ends_with_topic_ids


@pytest.mark.parametrize("starts_with_topic_ids", [True, False])
def test_session_epoch_when_mixed_usage_of_topic_i_ds(starts_with_topic_ids):
    foo_id = new_id() if starts_with_topic_ids else ZERO_UUID
    bar_id = ZERO_UUID if starts_with_topic_ids else new_id()
    response_version = LATEST if starts_with_topic_ids else 12
    tp0, tp1 = TopicPartition("foo", 0), TopicPartition("bar", 1)

    handler = FetchSessionHandler(1)
    builder = handler.new_builder()
    builder.add(tp0, pd(foo_id, 0, 100, 200))
    data = builder.build()
    assert_maps_equal(req_map(("foo", foo_id, 0, 0, 100, 200)), data.to_send, data.session_partitions)
    assert data.metadata.is_full
    assert data.can_use_topic_ids == starts_with_topic_ids

    respond(handler, NONE, 123, [("foo", 0, foo_id)], response_version)

    # Re-add the first partition, then add a partition with the opposite ID usage.
    builder2 = handler.new_builder()
    builder2.add(tp0, pd(foo_id, 10, 110, 210))
    builder2.add(tp1, pd(bar_id, 0, 100, 200))
    data2 = builder2.build()
    assert data2.metadata.session_id == 123
    assert data2.metadata.epoch == 1
    assert not data2.can_use_topic_ids


@pytest.mark.parametrize("use_topic_ids", [True, False])
def test_id_usage_with_all_forgotten_partitions(use_topic_ids):
    foo0 = TopicPartition("foo", 0)
    topic_id = new_id() if use_topic_ids else ZERO_UUID
    handler = FetchSessionHandler(1)
    builder = handler.new_builder()
    builder.add(foo0, pd(topic_id, 0, 100, 200))
    data = builder.build()
    assert_maps_equal(req_map(("foo", topic_id, 0, 0, 100, 200)), data.to_send, data.session_partitions)
    assert data.metadata.is_full
    assert data.can_use_topic_ids == use_topic_ids

    respond(handler, NONE, 123, [("foo", 0, topic_id)], LATEST if use_topic_ids else 12)

    # Remove the topic from the session.
    data2 = handler.new_builder().build()
    assert data2.to_forget == [TopicIdPartition(topic_id, "foo", 0)]
    assert data2.to_forget[0].topic_id == topic_id
    assert data2.metadata.session_id == 123
    assert data2.metadata.epoch == 1
    assert data2.can_use_topic_ids == use_topic_ids


def test_ok_to_add_new_id_after_topic_removed_from_session():
    topic_id = new_id()
    handler = FetchSessionHandler(1)
    builder = handler.new_builder()
    builder.add(TopicPartition("foo", 0), pd(topic_id, 0, 100, 200))
    data = builder.build()
    assert_maps_equal(req_map(("foo", topic_id, 0, 0, 100, 200)), data.to_send, data.session_partitions)
    assert data.metadata.is_full
    assert data.can_use_topic_ids

    respond(handler, NONE, 123, [("foo", 0, topic_id)], LATEST)

    # Remove the partition; the response keeps the session id as though the session were still open.
    data2 = handler.new_builder().build()
    assert_maps_equal({}, data2.to_send, data2.session_partitions)
    assert respond(handler, NONE, 123, [], LATEST)

    # Re-add a recreated topic with a new ID.
    builder3 = handler.new_builder()
    builder3.add(TopicPartition("foo", 0), pd(new_id(), 0, 100, 200))
    data3 = builder3.build()
    assert data3.metadata.session_id == 123
    assert data3.metadata.epoch == 2
    assert data3.can_use_topic_ids


@pytest.mark.parametrize("version", [12, LATEST])
def test_verify_full_fetch_response_partitions(version):
    topic_ids: dict = {}
    topic_names: dict = {}
    handler = FetchSessionHandler(1)
    add_topic_id(topic_ids, topic_names, "foo", version)
    add_topic_id(topic_ids, topic_names, "bar", version)
    foo_id, bar_id = topic_ids.get("foo", ZERO_UUID), topic_ids.get("bar", ZERO_UUID)
    foo0, foo1, bar0 = TopicPartition("foo", 0), TopicPartition("foo", 1), TopicPartition("bar", 0)

    issue = handler.verify_full_fetch_response_partitions([foo0, foo1, bar0], {foo_id, bar_id}, version)
    assert "extraPartitions=" in issue
    assert "omittedPartitions=" not in issue

    builder = handler.new_builder()
    builder.add(foo0, pd(foo_id, 0, 100, 200))
    builder.add(foo1, pd(foo_id, 10, 110, 210))
    builder.add(bar0, pd(bar_id, 20, 120, 220))
    builder.build()
    assert handler.verify_full_fetch_response_partitions([foo0, foo1, bar0], {foo_id, bar_id}, version) is None

    issue3 = handler.verify_full_fetch_response_partitions([foo0, foo1], {foo_id}, version)
    assert "extraPartitions=" not in issue3
    assert "omittedPartitions=" in issue3


def test_verify_full_fetch_response_partitions_with_topic_ids():
    topic_ids: dict = {}
    topic_names: dict = {}
    handler = FetchSessionHandler(1)
    for name in ("foo", "bar", "extra2"):
        add_topic_id(topic_ids, topic_names, name, LATEST)
    foo0, extra21, bar0 = TopicPartition("foo", 0), TopicPartition("extra2", 1), TopicPartition("bar", 0)
    all_ids = {topic_ids["foo"], topic_ids["extra2"], topic_ids["bar"]}

    # responseData(topicNames, version) with the test's names: extra2-1 resolves, so it is an extra partition.
    issue = handler.verify_full_fetch_response_partitions([foo0, extra21, bar0], all_ids, LATEST)
    assert "extraPartitions=" in issue
    assert "omittedPartitions=" not in issue

    builder = handler.new_builder()
    builder.add(foo0, pd(topic_ids["foo"], 0, 100, 200))
    builder.add(bar0, pd(topic_ids["bar"], 20, 120, 220))
    builder.build()
    issue2 = handler.verify_full_fetch_response_partitions([foo0, extra21, bar0], all_ids, LATEST)
    assert "extraPartitions=" in issue2
    assert "omittedPartitions=" not in issue2
    assert "extraIds=" in issue2                      # extra2's id is not in the session's topic names
    assert handler.verify_full_fetch_response_partitions(
        [foo0, bar0], {topic_ids["foo"], topic_ids["bar"]}, LATEST) is None

    # A response whose topic id the session does not know: the handler cannot even name its partitions.
    resolved = handler.resolve_response_partitions([("foo", topic_ids["foo"], [0]), (None, new_id(), [1]),
                                                    ("bar", topic_ids["bar"], [0])], LATEST)
    assert resolved == [foo0, bar0]


def test_top_level_error_resets_metadata():
    topic_ids: dict = {}
    topic_names: dict = {}
    handler = FetchSessionHandler(1)
    builder = handler.new_builder()
    add_topic_id(topic_ids, topic_names, "foo", LATEST)
    foo_id = topic_ids["foo"]
    builder.add(TopicPartition("foo", 0), pd(foo_id, 0, 100, 200))
    builder.add(TopicPartition("foo", 1), pd(foo_id, 10, 110, 210))
    data = builder.build()
    assert data.metadata.session_id == INVALID_SESSION_ID
    assert data.metadata.epoch == INITIAL_EPOCH

    respond(handler, NONE, 123, [("foo", 0, foo_id), ("foo", 1, foo_id)], LATEST)

    # An incremental fetch request which adds an ID unknown to the broker.
    builder2 = handler.new_builder()
    add_topic_id(topic_ids, topic_names, "unknown", LATEST)
    builder2.add(TopicPartition("unknown", 0), pd(topic_ids["unknown"], 0, 100, 200))
    data2 = builder2.build()
    assert not data2.metadata.is_full
    assert data2.metadata.session_id == 123
    assert data2.metadata.epoch == next_epoch(INITIAL_EPOCH)

    # A response with a top-level error.
    assert not respond(handler, UNKNOWN_TOPIC_ID, 123, [("unknown", 0, new_id())], LATEST)
    assert "was unable to process the fetch request" in handler.last_message

    # The next request closes the session and starts a new one.
    data3 = handler.new_builder().build()
    assert data3.metadata.session_id == 123
    assert data3.metadata.epoch == INITIAL_EPOCH
