"""The broker's other APIs through the sans-IO core: produce offsets, acks=0, metadata, list offsets, eviction."""

from __future__ import annotations

import datetime
import importlib

from broker_scenarios import _make, call, fetch_request, metadata_request, produce, produce_request
from kio.records.readers import read_batch

from fetchtool.broker.handler import NoReply
from fetchtool.broker.rawclient import make_batch


def _batches(records: bytes):
    out, pos = [], 0
    while pos < len(records):
        batch, size = read_batch(records, pos)
        out.append(batch)
        pos += size
    return out


def test_produce_assigns_base_offsets_by_patching_each_batch(core):
    broker = core(topics={"t": 1})
    assert produce(broker, "t", 0, [b"a", b"b", b"c"]) == 0
    assert produce(broker, "t", 0, [b"d"]) == 3
    both = make_batch([b"e"]) + make_batch([b"f", b"g"])  # two batches in one produce
    response = call(broker, produce_request("t", 0, both))
    assert response.responses[0].partition_responses[0].base_offset == 4
    fetched = call(broker, fetch_request(12, [("t", 0, 0, 1 << 20)]))
    batches = _batches(fetched.responses[0].partitions[0].records)
    assert [b.base_offset for b in batches] == [0, 3, 4, 5]
    assert [r.value for b in batches for r in b.records] == [b"a", b"b", b"c", b"d", b"e", b"f", b"g"]
    assert [r.offset for b in batches for r in b.records] == list(range(7))


def test_corrupt_batches_and_unknown_partitions_are_refused_per_partition(core):
    broker = core(topics={"t": 1})
    damaged = bytearray(make_batch([b"payload"]))
    damaged[-1] ^= 0xFF
    response = call(broker, produce_request("t", 0, bytes(damaged)))
    assert response.responses[0].partition_responses[0].error_code == 2  # CORRUPT_MESSAGE
    response = call(broker, produce_request("t", 7, make_batch([b"x"])))
    assert response.responses[0].partition_responses[0].error_code == 3
    assert broker.state.topics.partition("t", 0).log_end_offset == 0


def test_acks_zero_gets_no_response_but_the_data_is_appended(core):
    broker = core(topics={"t": 1})
    assert isinstance(call(broker, produce_request("t", 0, make_batch([b"x"]), acks=0)), NoReply)
    assert broker.state.topics.partition("t", 0).log_end_offset == 1


def test_metadata_names_this_broker_as_leader_and_reports_the_topic_ids_fetch_uses(core):
    broker = core(topics={"a": 3}, port=9999, node_id=4)
    response = call(broker, metadata_request(12, ["a", "missing"]))
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(4, "127.0.0.1", 9999)]
    a, missing = response.topics
    assert a.topic_id == broker.state.topics.get("a").topic_id
    assert [(p.partition_index, p.leader_id, p.error_code) for p in a.partitions] == [(0, 4, 0), (1, 4, 0), (2, 4, 0)]
    assert missing.error_code == 3  # the request disallowed auto-creation
    v1 = call(broker, metadata_request(1, None))
    assert [t.name for t in v1.topics] == ["a"]


def test_list_offsets_earliest_and_latest(core):
    broker = core(topics={"t": 1})
    produce(broker, "t", 0, [b"1", b"2"])
    m = importlib.import_module("kio.schema.list_offsets.v7.request")

    def ask(ts):
        part = _make(m.ListOffsetsPartition, partition_index=0, timestamp=ts)
        req = _make(m.ListOffsetsRequest, replica_id=-1, isolation_level=0,
                    topics=(_make(m.ListOffsetsTopic, name="t", partitions=(part,)),))
        return call(broker, req).topics[0].partitions[0].offset

    assert (ask(-2), ask(-1)) == (0, 2)


def test_create_topics_refuses_an_existing_name(core):
    broker = core(topics={"t": 1})
    m = importlib.import_module("kio.schema.create_topics.v7.request")
    req = _make(m.CreateTopicsRequest, timeout=datetime.timedelta(seconds=1), validate_only=False, topics=(
        _make(m.CreatableTopic, name="t", num_partitions=2, replication_factor=1, assignments=(), configs=()),
        _make(m.CreatableTopic, name="new", num_partitions=2, replication_factor=1, assignments=(), configs=()),
    ))
    result = call(broker, req)
    assert [(t.name, t.error_code) for t in result.topics] == [("t", 36), ("new", 0)]
    assert len(broker.state.topics.get("new").partitions) == 2


def test_a_stale_session_is_evicted_by_a_newcomer_and_its_owner_then_gets_70(core):
    broker = core(topics={"t": 2}, cache_slots=1, cache_shards=1, eviction_ms=1000)
    first = call(broker, fetch_request(12, [("t", 0, 0, 100)], epoch=0), now_ms=0)
    refused = call(broker, fetch_request(12, [("t", 1, 0, 100)], epoch=0), now_ms=500)
    assert first.session_id != 0 and refused.session_id == 0  # cache full, nothing stale yet
    second = call(broker, fetch_request(12, [("t", 1, 0, 100)], epoch=0), now_ms=1001 + 1)
    assert second.session_id not in (0, first.session_id)
    stale = call(broker, fetch_request(12, [], session_id=first.session_id, epoch=1), now_ms=1003)
    assert stale.error_code == 70
    assert broker.fetch.cache.metrics()["IncrementalFetchSessionEvictionsPerSec"] == 1
