"""Request builders and small helpers shared by the broker tests (kio entities, never hand-made bytes)."""

from __future__ import annotations

import datetime
import importlib
import socket
import uuid

from fetchtool.broker import wire
from fetchtool.broker.handler import Reply
from fetchtool.broker.rawclient import make_batch


def fetch_module(version: int):
    return importlib.import_module(f"kio.schema.fetch.v{version}.request")


def fetch_request(version: int, partitions, *, session_id=0, epoch=-1, max_wait_ms=0, min_bytes=1,
                  max_bytes=0x7FFFFFFF, forgotten=(), topic_ids=None):
    """partitions: [(topic, partition, fetch_offset, partition_max_bytes)], grouped by consecutive topic.
    For v13+, topic_ids maps topic name -> uuid (a name missing from it is sent as a random, unknown id)."""
    m = fetch_module(version)
    topics = []
    for topic, part, offset, pmax in partitions:
        p = _make(m.FetchPartition, partition=part, fetch_offset=offset, partition_max_bytes=pmax)
        if topics and topics[-1][0] == topic:
            topics[-1][1].append(p)
        else:
            topics.append((topic, [p]))

    def topic_key(name):
        if version >= 13:
            return {"topic_id": (topic_ids or {}).get(name) or uuid.uuid5(uuid.NAMESPACE_DNS, name)}
        return {"topic": name}

    fetch_topics = tuple(_make(m.FetchTopic, partitions=tuple(ps), **topic_key(t)) for t, ps in topics)
    forgotten_topics = tuple(
        _make(m.ForgottenTopic, partitions=tuple(ps), **topic_key(t)) for t, ps in forgotten
    ) if version >= 7 else ()
    return _make(m.FetchRequest, max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=min_bytes,
                 max_bytes=max_bytes, session_id=session_id, session_epoch=epoch, topics=fetch_topics,
                 forgotten_topics_data=forgotten_topics)


def produce_request(topic: str, partition: int, records: bytes, version: int = 9, acks: int = -1):
    m = importlib.import_module(f"kio.schema.produce.v{version}.request")
    data = _make(m.PartitionProduceData, index=partition, records=records)
    return _make(m.ProduceRequest, acks=acks, timeout=datetime.timedelta(seconds=5),
                 topic_data=(_make(m.TopicProduceData, name=topic, partition_data=(data,)),))


def metadata_request(version: int = 12, topics=None):
    m = importlib.import_module(f"kio.schema.metadata.v{version}.request")
    wanted = None if topics is None else tuple(_make(m.MetadataRequestTopic, name=t, topic_id=None) for t in topics)
    return _make(m.MetadataRequest, topics=wanted, allow_auto_topic_creation=False,
                 include_cluster_authorized_operations=False, include_topic_authorized_operations=False)


def call(core, request, client="127.0.0.1:50000", now_ms=0):
    """Run one request through a sans-IO BrokerCore; returns the decoded response (or the Action if none)."""
    key, version = int(request.__api_key__), int(request.__version__)
    frame = wire.encode_request(key, 7, request)[4:]
    action = core.handle_frame(frame, client, now_ms)
    if not isinstance(action, Reply):
        return action
    _, response = wire.decode_response(action.frame[4:], key, version)
    return response


def produce(core, topic, partition, values, now_ms=0):
    response = call(core, produce_request(topic, partition, make_batch(values)), now_ms=now_ms)
    part = response.responses[0].partition_responses[0]
    assert part.error_code == 0, part
    return part.base_offset


def response_partitions(response):
    """[(topic or topic_id, partition, error, high_watermark, records_bytes)] in response order."""
    out = []
    for t in response.responses:
        name = getattr(t, "topic", None) or getattr(t, "topic_id", None)
        for p in t.partitions:
            out.append((name, p.partition_index, int(p.error_code), p.high_watermark, len(p.records or b"")))
    return out


def _make(cls, **values):
    import dataclasses

    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


def closed_by_broker(sock: socket.socket, timeout: float = 5.0) -> bool:
    """True when the broker closes the connection (EOF or reset) within `timeout` seconds."""
    sock.settimeout(timeout)
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False
