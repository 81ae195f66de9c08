"""Where fetchtool broker answered differently from Apache Kafka 4.3.1 on the same request (seen field by field
against the real broker, tests/kafka/test_differential_engine.py), it now answers as Kafka does. One test per
difference, named after it; no Kafka needed here."""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import uuid

import pytest
from broker_scenarios import call, fetch_request, metadata_request, produce, response_partitions
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from fetchtool.broker import apis
from fetchtool.broker.rawclient import make_batch

# ApiVersions v3 from Kafka 4.3.1 for every api fetchtool broker implements.
KAFKA_431 = {0: (0, 13), 1: (4, 18), 2: (1, 11), 3: (0, 13), 8: (2, 10), 9: (1, 10), 10: (0, 6), 18: (0, 4),
             19: (2, 7), 22: (0, 5)}


def follower(request, replica_id=2):
    if int(request.__version__) >= 15:
        return dataclasses.replace(request, replica_state=dataclasses.replace(request.replica_state,
                                                                              replica_id=replica_id))
    return dataclasses.replace(request, replica_id=replica_id)


def test_api_versions_advertises_kafka_4_3_1_ranges_for_every_implemented_api(core):
    broker = core()
    response = call(broker, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    assert {int(k.api_key): (k.min_version, k.max_version) for k in response.api_keys} == KAFKA_431


def test_produce_v0_to_v2_are_advertised_but_not_served_as_in_kafka():
    assert apis.ADVERTISED[0] == (0, 13) and apis.SUPPORTED[0] == (3, 13)   # the connection is closed (bad_input)


@pytest.mark.parametrize("version", [7, 12, 13, 15, 18])
def test_follower_fetch_from_a_non_replica_gets_not_leader_or_follower_and_hw_minus_one(core, version):
    broker = core(topics={"t": 2})
    produce(broker, "t", 0, [b"a", b"b"])
    ids = {"t": broker.state.topics.get("t").topic_id}
    response = call(broker, follower(fetch_request(version, [("t", 0, 0, 1000), ("t", 1, 0, 1000)], epoch=0,
                                                   topic_ids=ids)))
    assert [p[1:] for p in response_partitions(response)] == [(0, 6, -1, 0), (1, 6, -1, 0)]
    # Still a full fetch: Kafka creates the (privileged) session all the same.
    assert response.session_id != 0 and broker.fetch.cache.get(response.session_id).privileged


def test_follower_fetch_naming_a_leader_epoch_gets_unknown_leader_epoch(core):
    broker = core(topics={"t": 1})
    request = follower(fetch_request(12, [("t", 0, 0, 1000)]))
    part = dataclasses.replace(request.topics[0].partitions[0], current_leader_epoch=0)
    request = dataclasses.replace(request, topics=(dataclasses.replace(request.topics[0], partitions=(part,)),))
    assert [p[2] for p in response_partitions(call(broker, request))] == [75]


def test_consumer_naming_a_newer_leader_epoch_gets_unknown_leader_epoch_and_the_current_one_reads(core):
    broker = core(topics={"t": 1})
    for epoch, error in ((1, 75), (0, 0), (-1, 0)):
        request = fetch_request(12, [("t", 0, 0, 1000)])
        part = dataclasses.replace(request.topics[0].partitions[0], current_leader_epoch=epoch)
        request = dataclasses.replace(request, topics=(dataclasses.replace(request.topics[0], partitions=(part,)),))
        assert [p[2] for p in response_partitions(call(broker, request))] == [error], epoch


def test_not_leader_or_follower_names_the_current_leader_from_v16(core):
    broker = core(topics={"t": 1}, node_id=1)
    ids = {"t": broker.state.topics.get("t").topic_id}
    for version, leader in ((15, (-1, -1)), (16, (1, 0))):
        response = call(broker, follower(fetch_request(version, [("t", 0, 0, 1000)], topic_ids=ids)))
        got = response.responses[0].partitions[0].current_leader
        assert (got.leader_id, got.leader_epoch) == leader


def test_aborted_transactions_are_an_empty_array_on_refused_partitions_and_null_on_failed_reads(core):
    broker = core(topics={"t": 2})
    request = fetch_request(12, [("t", 0, 0, 1000), ("t", 1, 99, 1000), ("nope", 0, 0, 1000)])
    for read_committed, on_read in ((False, None), (True, ())):
        response = call(broker, dataclasses.replace(request, isolation_level=int(read_committed)))
        aborted = [(int(p.error_code), p.aborted_transactions) for t in response.responses for p in t.partitions]
        assert aborted == [(0, on_read), (1, None), (3, ())], read_committed


def test_a_consumers_unknown_topic_ids_come_before_its_unknown_partitions_a_followers_keep_request_order(core):
    broker = core(topics={"t": 1})
    ghost = uuid.uuid4()
    ids = {"t": broker.state.topics.get("t").topic_id, "ghost": ghost}
    request = fetch_request(13, [("t", 5, 0, 1000), ("ghost", 0, 0, 1000), ("t", 0, 0, 1000)], topic_ids=ids)
    consumer = [(p[1], p[2]) for p in response_partitions(call(broker, request))]
    assert consumer == [(0, 0), (0, 100), (5, 3)]          # read, then UNKNOWN_TOPIC_ID, then UNKNOWN_TOPIC_OR_PART.
    followed = [(p[1], p[2]) for p in response_partitions(call(broker, follower(request)))]
    assert followed == [(0, 6), (5, 3), (0, 100)]          # refused read, then the erroneous in request order


def test_metadata_v0_with_an_empty_topic_list_lists_every_topic(core):
    broker = core(topics={"a": 1, "b": 2})
    m = importlib.import_module("kio.schema.metadata.v0.request")
    assert sorted((t.name, len(t.partitions)) for t in call(broker, m.MetadataRequest(topics=())).topics) == [
        ("a", 1), ("b", 2)]
    assert call(broker, metadata_request(13, ["a"])).error_code == 0


def test_produce_v13_addresses_topics_by_id_and_an_unknown_id_gets_unknown_topic_id(core):
    broker = core(topics={"t": 2})
    known, ghost = broker.state.topics.get("t").topic_id, uuid.uuid4()
    m = importlib.import_module("kio.schema.produce.v13.request")

    def produce_to(topic_id, index):
        data = m.PartitionProduceData(index=index, records=make_batch([b"x"]))
        request = m.ProduceRequest(transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=5),
                                   topic_data=(m.TopicProduceData(topic_id=topic_id, partition_data=(data,)),))
        topic = call(broker, request).responses[0]
        return topic.topic_id, int(topic.partition_responses[0].error_code)

    assert produce_to(known, 1) == (known, 0)
    assert produce_to(known, 5) == (known, 3)
    assert produce_to(ghost, 0) == (ghost, 100)
    assert broker.state.topics.partition("t", 1).log_end_offset == 1


def test_offset_commit_v10_and_offset_fetch_v8_to_v10_serve_groups_and_topic_ids(core):
    broker = core(topics={"t": 1})
    topic_id = broker.state.topics.get("t").topic_id
    c = importlib.import_module("kio.schema.offset_commit.v10.request")
    commit = c.OffsetCommitRequest(
        group_id="g", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=(c.OffsetCommitRequestTopic(topic_id=topic_id, partitions=(c.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=42, committed_leader_epoch=-1, committed_metadata="m"),)),))
    assert int(call(broker, commit).topics[0].partitions[0].error_code) == 0
    for version in (8, 9, 10):
        f = importlib.import_module(f"kio.schema.offset_fetch.v{version}.request")
        key = {"topic_id": topic_id} if version >= 10 else {"name": "t"}
        group = f.OffsetFetchRequestGroup(group_id="g", topics=(f.OffsetFetchRequestTopics(**key, partition_indexes=(0,)),),
                                          **({"member_id": None, "member_epoch": -1} if version >= 9 else {}))
        response = call(broker, f.OffsetFetchRequest(groups=(group,), require_stable=False))
        (answer,) = response.groups
        assert answer.group_id == "g" and answer.topics[0].partitions[0].committed_offset == 42, version


def test_read_committed_partition_whose_first_batch_does_not_fit_has_null_aborted_transactions(core):
    # readFromLog replaces a cut first batch by an empty read without the aborted-transaction list; a 0-byte
    # limit (nothing read at all) keeps the list.
    broker = core(topics={"t": 3})
    for p in range(3):
        produce(broker, "t", p, [b"x" * 50])
    batch = len(make_batch([b"x" * 50]))
    request = fetch_request(12, [("t", 0, 0, batch), ("t", 1, 0, 40), ("t", 2, 0, 40)], max_bytes=batch)
    response = call(broker, dataclasses.replace(request, isolation_level=1))
    got = [(p.partition_index, len(p.records or b""), p.aborted_transactions) for p in response.responses[0].partitions]
    assert got == [(0, batch, ()), (1, 0, ()), (2, 0, ())]  # the response limit is used up: 0 bytes left
    request = fetch_request(12, [("t", 0, 0, batch), ("t", 1, 0, 40)])
    response = call(broker, dataclasses.replace(request, isolation_level=1))
    got = [(p.partition_index, len(p.records or b""), p.aborted_transactions) for p in response.responses[0].partitions]
    assert got == [(0, batch, ()), (1, 0, None)]            # 40 bytes left, the batch is larger: cut, then dropped


def test_a_v13_topic_sent_with_the_all_zero_id_is_unknown_topic_id_not_a_closed_connection(core):
    # kio reads the all-zero uuid as None; the broker crashed on it (the connection was closed as an internal error).
    broker = core(topics={"t": 1})
    zero = uuid.UUID(int=0)
    response = call(broker, fetch_request(13, [("z", 1, 0, 1000)], epoch=0, topic_ids={"z": zero}))
    assert [(p[1], p[2]) for p in response_partitions(response)] == [(1, 100)] and response.session_id != 0


def test_a_zero_id_partition_followed_by_another_in_the_response_is_kafkas_unknown_server_error(core):
    # Kafka 4.3.1's FetchResponse.toMessage compares a zero-id topic by its name, null here: NullPointerException,
    # answered as UNKNOWN_SERVER_ERROR with the request's SessionId and no partitions. A consumer's response is sized
    # (and fails) before its full context makes a session; a follower's after: its session exists, unannounced.
    broker = core(topics={"t": 1})
    ids = {"t": broker.state.topics.get("t").topic_id, "z": uuid.UUID(int=0), "ghost": uuid.uuid4()}
    cache = broker.fetch.cache
    last = call(broker, fetch_request(13, [("t", 0, 0, 1000), ("z", 1, 0, 1000)], epoch=0, topic_ids=ids))
    assert (last.error_code, len(response_partitions(last))) == (0, 2)        # zero id last: fine
    before = (cache.size, cache.counter)
    consumer = call(broker, fetch_request(13, [("z", 1, 0, 1000), ("ghost", 0, 0, 1000)], epoch=0, topic_ids=ids))
    assert (consumer.error_code, consumer.session_id, consumer.responses) == (-1, 0, ())
    assert (cache.size, cache.counter) == before                               # no session, counter unmoved
    followed = call(broker, follower(fetch_request(13, [("z", 1, 0, 1000), ("ghost", 0, 0, 1000)], session_id=0,
                                                   epoch=0, topic_ids=ids)))
    assert (followed.error_code, followed.session_id, followed.responses) == (-1, 0, ())
    assert (cache.size, cache.counter) == (before[0] + 1, before[1] + 1)       # created, never named
    incremental = call(broker, fetch_request(13, [("ghost", 0, 0, 1000)], session_id=last.session_id, epoch=1,
                                             topic_ids=ids))
    assert (incremental.error_code, incremental.session_id) == (-1, last.session_id)
    assert cache.get(last.session_id).epoch == 2                               # newContext moved it on regardless


def test_unknown_server_error_below_v13_lists_the_partitions_as_the_request_did_repeats_included(core):
    # FetchRequest.getErrorResponse walks the request, not the de-duplicated fetch data.
    broker = core(topics={"t": 1})
    request = fetch_request(12, [("t", 0, 0, 1000), ("t", 0, 5, 1000), ("u", 1, 0, 1000)], session_id=-300_000_000,
                            epoch=0)
    response = call(broker, request)
    assert (response.error_code, response.session_id) == (-1, -300_000_000)
    assert [(p[0], p[1], p[2], p[3]) for p in response_partitions(response)] == [
        ("t", 0, -1, -1), ("t", 0, -1, -1), ("u", 1, -1, -1)]


def test_the_future_replica_id_reads_to_the_log_end_without_an_aborted_transaction_list(core):
    # FetchIsolation.of: isolation READ_COMMITTED is for consumers only; replica id -3 (a future local replica) reads
    # like a follower would, so its good reads have null AbortedTransactions even when read committed.
    broker = core(topics={"t": 1})
    produce(broker, "t", 0, [b"a"])
    request = dataclasses.replace(fetch_request(12, [("t", 0, 0, 1000)]), isolation_level=1)
    for replica_id, aborted in ((-1, ()), (-2, ()), (-3, None)):
        (part,) = call(broker, follower(request, replica_id)).responses[0].partitions
        assert (int(part.error_code), len(part.records) > 0, part.aborted_transactions) == (0, True, aborted)
