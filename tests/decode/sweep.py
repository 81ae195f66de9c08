"""A generated capture that sweeps every Fetch version (v0-v18) and FetchSnapshot (v0-v1).

One TCP connection per version, each with what a support engineer meets in the field: a full fetch of two topics
with records (message format by version: magic 0 for v0-1, 1 for v2-3, 2 from v4), an empty partition, a
partition error, a trailing partial batch (KIP-74), and from v7 an incremental fetch that changes one partition
and forgets another, then a retried epoch answered with INVALID_FETCH_SESSION_EPOCH. Odd versions travel in
1,448-byte Ethernet-sized segments, even ones in 64 KB loopback segments, so responses span many frames.
"""

from __future__ import annotations

import uuid
from struct import pack

from kafka.record.memory_records import MemoryRecordsBuilder

from fetchtool.capture.conversation import TcpConversation
from fetchtool.capture.events import Endpoint
from fetchtool.capture.writer import PcapWriter
from fetchtool.exchange import ForgottenPartition, RequestPartition, ResponsePartition
from fetchtool.protocol import codec
from fetchtool.protocol.headers import encode_request_header, encode_response_header

FETCH_VERSIONS = range(0, 19)
SNAPSHOT_VERSIONS = range(0, 2)
ORDERS_ID = str(uuid.UUID("6b9a1c4e-0000-4000-8000-00000000a001"))
AUDIT_ID = str(uuid.UUID("6b9a1c4e-0000-4000-8000-00000000a002"))


def records(magic: int, base_offset: int, count: int, compression: int = 0) -> bytes:
    builder = MemoryRecordsBuilder(magic, compression, batch_size=1 << 20, offset=base_offset)
    for i in range(count):
        builder.append(timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=b"value-%d" % i, headers=[])
    builder.close()
    return bytes(builder.buffer())


def _message(header: bytes, body: bytes) -> bytes:
    return pack(">i", len(header) + len(body)) + header + body


def _topic(version: int, name: str, tid: str) -> tuple[str | None, str | None]:
    return (None, tid) if version >= 13 else (name, None)


def _request_partition(version: int, topic, partition: int, offset: int) -> RequestPartition:
    return RequestPartition(*topic, partition, offset, 1_048_576 - partition * 1000,
                            100 + partition if version >= 5 else -1,
                            7 if version >= 9 else -1, 6 if version >= 12 else -1)


def _response_partition(version, topic, partition, *, error=0, hw=0, blob=None, diverging=-1, aborted=-1):
    return ResponsePartition(*topic, partition, error, hw, hw - 1 if version >= 4 else -1,
                             5 if version >= 5 else -1, 2 if version >= 11 else -1,
                             diverging if version >= 12 else -1, aborted if version >= 4 else -1,
                             len(blob or b""), 0, 0, None)


def fetch_conversation(version: int):
    """(request body, response body) pairs for one connection at `version`."""
    magic = 0 if version < 2 else 1 if version < 4 else 2
    orders, audit = _topic(version, "orders", ORDERS_ID), _topic(version, "audit", AUDIT_ID)
    sessions = version >= 7
    full = codec.FetchRequestBody(
        replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=52_428_800 if version >= 3 else 0x7FFFFFFF,
        isolation_level=1 if version >= 4 else 0, session_id=0, session_epoch=0 if sessions else -1,
        rack_id="rack-a" if version >= 11 else "",
        partitions=(*(_request_partition(version, orders, p, 40 * p) for p in range(3)),
                    *(_request_partition(version, audit, p, 7) for p in range(2))))
    orders0 = records(magic, 0, 150) + records(magic, 150, 3, compression=1)  # a plain and a gzip batch
    audit0 = records(magic, 7, 4) + records(magic, 11, 6)[:23]  # cut inside the second batch (KIP-74)
    blobs = (orders0, None, None, audit0, b"")
    full_resp = codec.FetchResponseBody(
        throttle_time_ms=3 if version >= 1 else 0, error_code=0, session_id=1000 + version if sessions else 0,
        partitions=(_response_partition(version, orders, 0, hw=153, blob=orders0, aborted=0),
                    _response_partition(version, orders, 1, hw=40),
                    _response_partition(version, orders, 2, error=1, hw=-1),
                    _response_partition(version, audit, 0, hw=20, blob=audit0),
                    _response_partition(version, audit, 1, hw=7, diverging=4)),
        records=blobs)
    pairs = [(full, full_resp)]
    if sessions:
        sid = 1000 + version
        incremental = codec.FetchRequestBody(
            replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=52_428_800, isolation_level=1,
            session_id=sid, session_epoch=1, rack_id="rack-a" if version >= 11 else "",
            partitions=(_request_partition(version, orders, 1, 41),),
            forgotten=(ForgottenPartition(*audit, 1),))
        inc_resp = codec.FetchResponseBody(
            throttle_time_ms=0, error_code=0, session_id=sid,
            partitions=(_response_partition(version, orders, 1, hw=41),), records=(None,))
        retry_resp = codec.FetchResponseBody(throttle_time_ms=0, error_code=71, session_id=0, partitions=())
        pairs += [(incremental, inc_resp), (incremental, retry_resp)]
    return pairs


def snapshot_conversation(version: int):
    topic = ("__cluster_metadata", None)
    req = codec.FetchRequestBody(
        replica_id=1, max_wait_ms=None, min_bytes=None, max_bytes=1_048_576, isolation_level=None,
        session_id=None, session_epoch=None, rack_id=None,
        partitions=(RequestPartition(*topic, 0, 0, -1, -1, 3, -1, snapshot_end_offset=500, snapshot_epoch=2),))
    blob = bytes(range(256)) * 4
    ok = codec.FetchResponseBody(
        throttle_time_ms=0, error_code=0, session_id=None, records=(blob,),
        partitions=(ResponsePartition(*topic, 0, 0, 4096, -1, 0, -1, -1, -1, len(blob), 0, 0, None,
                                      snapshot_end_offset=500, snapshot_epoch=2),))
    missing = codec.FetchResponseBody(
        throttle_time_ms=0, error_code=0, session_id=None, records=(None,),
        partitions=(ResponsePartition(*topic, 0, 98, 0, -1, 0, -1, -1, -1, 0, 0, 0, None,
                                      snapshot_end_offset=500, snapshot_epoch=2),))
    return [(req, ok), (req, missing)]


def write_sweep(path, port: int = 9092) -> None:
    broker = Endpoint("10.9.0.2", port)
    ts = 1_700_000_000.0
    with PcapWriter(path) as writer:
        for api_key, versions, conversation in ((1, FETCH_VERSIONS, fetch_conversation),
                                                (59, SNAPSHOT_VERSIONS, snapshot_conversation)):
            for version in versions:
                client = Endpoint("10.9.0.1", 40000 + api_key * 100 + version)
                conv = TcpConversation(writer, client, broker, segment_size=1448 if version % 2 else 65483)
                ts = conv.handshake(ts)
                for corr, (req, resp) in enumerate(conversation(version), start=1):
                    header = encode_request_header(api_key, version, corr, f"sweep-v{version}")
                    ts = conv.send("client", _message(header, codec.encode_request(api_key, version, req)), ts)
                    body = codec.encode_response(api_key, version, resp)
                    ts = conv.send("server", _message(encode_response_header(api_key, version, corr), body), ts)
                ts = conv.close(ts)
