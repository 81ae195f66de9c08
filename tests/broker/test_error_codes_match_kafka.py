"""Requests Kafka parses but answers with an error code, or cannot parse and closes: the same raw bytes go to Apache
Kafka 4.3.1 and to fetchtool broker, and both must end the same way: the same error codes in the same places, or
the connection closed without an answer. Built around what a fuzzer found fetchtool's handlers raising on (null
arrays where the schema allows none, topics by ids nobody has); fetchtool must never close with an internal error.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import logging
import socket
import struct
import uuid

import pytest
from broker_scenarios import fetch_request

from fetchtool.broker import wire
from fetchtool.broker.background import BrokerThread
from fetchtool.broker.state import BrokerConfig

pytestmark = pytest.mark.kafka

KAFKA = {"nodes": 1, "cache_slots": 16}
TOPIC = "known"
CLOSED = "closed without an answer"


@pytest.fixture(scope="module")
def ports(kafka):
    kafka.create_topic(TOPIC, 2)
    node = kafka.nodes[0]
    config = BrokerConfig(host="127.0.0.1", port=0, node_id=node.node_id, auto_create_partitions=0)
    with BrokerThread(config, topics={TOPIC: 2}) as bt:
        yield {"kafka": node.port, "fetchtool": bt.port, "broker": bt}


def answer(port: int, frame: bytes, api_key: int, version: int):
    """The error codes of the answer (every *error_code field, by path), or CLOSED."""
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        sock.sendall(frame)
        data = b""
        try:
            while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
                chunk = sock.recv(1 << 20)
                if not chunk:
                    return CLOSED
                data += chunk
        except ConnectionResetError:
            return CLOSED
    _, response = wire.decode_response(data[4:], api_key, version)
    return error_codes(response)


def error_codes(entity, path: str = "") -> list[tuple[str, int]]:
    out = []
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if f.metadata.get("kafka_type") == "error_code":
            out.append((path + f.name, int(value)))
        elif isinstance(value, tuple):
            for i, item in enumerate(value):
                if dataclasses.is_dataclass(item):
                    out.extend(error_codes(item, f"{path}{f.name}[{i}]."))
        elif dataclasses.is_dataclass(value):
            out.extend(error_codes(value, f"{path}{f.name}."))
    return out


def null_array(key: int, with_empty, with_one) -> bytes:
    """The frame of `with_empty` (a request whose array of interest is empty), that array made null: the first byte
    where it differs from `with_one` (the same request with one element there) is the array's length, compact
    (1 -> 0) or int32 (0 -> -1)."""
    empty, one = wire.encode_request(key, 9, with_empty), wire.encode_request(key, 9, with_one)
    at = next(i for i, (a, b) in enumerate(zip(empty, one)) if a != b and i >= 4)  # past the size prefix
    assert len(one) > len(empty)
    if type(with_empty).__flexible__:
        assert empty[at] == 1
        return empty[:at] + b"\x00" + empty[at + 1:]
    assert empty[at - 3 : at + 1] == b"\x00\x00\x00\x00"
    return empty[: at - 3] + b"\xff\xff\xff\xff" + empty[at + 1:]


def fetch_null_topics(version: int) -> bytes:
    base = fetch_request(version, [])
    one = fetch_request(version, [(TOPIC, 0, 0, 1000)])
    return null_array(1, base, one)


def fetch_null_partitions(version: int) -> bytes:
    one = fetch_request(version, [(TOPIC, 0, 0, 1000)])
    empty_topic = dataclasses.replace(one.topics[0], partitions=())
    return null_array(1, dataclasses.replace(one, topics=(empty_topic,)), one)


def zero_with(m, entity: str, **values):
    return dataclasses.replace(wire.zero_entity(getattr(m, entity)), **values)


def produce_null_topic_data() -> bytes:
    m = importlib.import_module("kio.schema.produce.v9.request")
    topic = zero_with(m, "TopicProduceData", name=TOPIC)
    base = zero_with(m, "ProduceRequest", acks=1, timeout=datetime.timedelta(seconds=5))
    return null_array(0, base, dataclasses.replace(base, topic_data=(topic,)))


def list_offsets_null_topics() -> bytes:
    m = importlib.import_module("kio.schema.list_offsets.v7.request")
    base = zero_with(m, "ListOffsetsRequest", replica_id=-1)
    return null_array(2, base, dataclasses.replace(base, topics=(zero_with(m, "ListOffsetsTopic", name=TOPIC),)))


def find_coordinator_null_keys() -> bytes:
    m = importlib.import_module("kio.schema.find_coordinator.v4.request")
    base = zero_with(m, "FindCoordinatorRequest")
    return null_array(10, base, dataclasses.replace(base, coordinator_keys=("g",)))


def create_topics_null_topics() -> bytes:
    m = importlib.import_module("kio.schema.create_topics.v7.request")
    base = zero_with(m, "CreateTopicsRequest", timeout=datetime.timedelta(seconds=5), validate_only=True)
    topic = zero_with(m, "CreatableTopic", name="new-topic", num_partitions=1, replication_factor=1)
    return null_array(19, base, dataclasses.replace(base, topics=(topic,)))


def create_topics_too_many_partitions() -> bytes:
    # what the fuzzer sent (8 million partitions: 40 s of CPU and 2.7 GB before); validate_only, so Kafka creates
    # nothing either way
    m = importlib.import_module("kio.schema.create_topics.v7.request")
    topic = zero_with(m, "CreatableTopic", name="huge", num_partitions=8_323_075, replication_factor=1)
    small = zero_with(m, "CreatableTopic", name="small", num_partitions=1, replication_factor=1)
    request = zero_with(m, "CreateTopicsRequest", timeout=datetime.timedelta(seconds=5), validate_only=True,
                        topics=(small, topic))
    return wire.encode_request(19, 9, request)


def offset_commit_null_topics() -> bytes:
    m = importlib.import_module("kio.schema.offset_commit.v8.request")
    base = zero_with(m, "OffsetCommitRequest", group_id="g", generation_id_or_member_epoch=-1, member_id="")
    return null_array(8, base, dataclasses.replace(base, topics=(zero_with(m, "OffsetCommitRequestTopic",
                                                                            name=TOPIC),)))


def offset_fetch_null_groups() -> bytes:
    m = importlib.import_module("kio.schema.offset_fetch.v8.request")
    base = zero_with(m, "OffsetFetchRequest")
    return null_array(9, base, dataclasses.replace(base, groups=(zero_with(m, "OffsetFetchRequestGroup",
                                                                           group_id="g", topics=None),)))


def fetch_by_id(version: int, topic_id: uuid.UUID | None, partitions: int = 2) -> bytes:
    # kio writes a None topic id as the all-zero uuid
    request = fetch_request(version, [(TOPIC, p, 0, 1000) for p in range(partitions)])
    topic = dataclasses.replace(request.topics[0], topic_id=topic_id)
    return wire.encode_request(1, 9, dataclasses.replace(request, topics=(topic,)))


CASES = {
    # name: (frame, api key, version)
    "fetch v12, null topics": (lambda: fetch_null_topics(12), 1, 12),
    "fetch v12, null partitions": (lambda: fetch_null_partitions(12), 1, 12),
    "fetch v11, null topics (int32 -1)": (lambda: fetch_null_topics(11), 1, 11),
    "fetch v16, null partitions": (lambda: fetch_null_partitions(16), 1, 16),
    "fetch v13, the zero topic id": (lambda: fetch_by_id(13, None, partitions=1), 1, 13),
    "fetch v13, the zero topic id, two partitions": (lambda: fetch_by_id(13, None), 1, 13),
    "fetch v17, the zero topic id": (lambda: fetch_by_id(17, None), 1, 17),
    "fetch v13, an unknown topic id": (lambda: fetch_by_id(13, uuid.UUID(int=0xBAD)), 1, 13),
    "produce v9, null topic data": (produce_null_topic_data, 0, 9),
    "list offsets v7, null topics": (list_offsets_null_topics, 2, 7),
    "find coordinator v4, null keys": (find_coordinator_null_keys, 10, 4),
    "create topics v7, null topics": (create_topics_null_topics, 19, 7),
    "create topics v7, 8 million partitions": (create_topics_too_many_partitions, 19, 7),
    "offset commit v8, null topics": (offset_commit_null_topics, 8, 8),
    "offset fetch v8, null groups": (offset_fetch_null_groups, 9, 8),
}


@pytest.mark.parametrize("case", list(CASES))
def test_fetchtool_ends_the_request_as_kafka_does(ports, case, caplog):
    caplog.set_level(logging.INFO, logger="fetchtool.broker")
    build, key, version = CASES[case]
    frame = build()
    bt = ports["broker"]
    bugs = bt.call(lambda: bt.broker.counters.get("internal_error", 0))
    theirs = answer(ports["kafka"], frame, key, version)
    ours = answer(ports["fetchtool"], frame, key, version)
    assert ours == theirs, f"{case}: kafka {theirs}, fetchtool {ours}"
    assert bt.call(lambda: bt.broker.counters.get("internal_error", 0)) == bugs   # no handler raised
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
