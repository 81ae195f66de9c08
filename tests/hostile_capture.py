"""A capture from a hostile network: real Kafka wire bytes (fetchtool's capture writer and codec) whose client
ids, client software names and versions (ApiVersions v3), topic names (inline in Fetch v12, and named by a
Metadata v12 response for a Fetch v13 topic id) and rack ids carry terminal escapes and other control
characters."""

from __future__ import annotations

import datetime
import uuid
from pathlib import Path

from fetchtool.capture.events import Endpoint
from fetchtool.capture.writer import LINKTYPE_ETHERNET, PcapWriter, TcpConversation
from fetchtool.exchange import RequestPartition, ResponsePartition
from fetchtool.protocol import codec
from fetchtool.protocol.headers import API_VERSIONS, FETCH, METADATA
from fetchtool.protocol.messages import request_frame, response_frame

# Set the window title, blink, a C1 CSI (U+009B), NUL, DEL, CR, backspace; and rich markup that must stay text.
ATTACK = "\x1b]0;pwned\x07\x1b[5m\x9b2J\x00\x7f\r\x08"
CLIENT_ID = f"evil{ATTACK}[bold]x[/bold]"
OTHER_CLIENT_ID = "refused\u202egnp.exe\u2028\tnext\x1b[2K"   # a right-to-left override, a line separator, a tab
SOFTWARE_NAME = f"apache-kafka-java{ATTACK}"
SOFTWARE_VERSION = f"3.9.0{ATTACK}"
TOPIC = f"orders{ATTACK}"
TOPIC_BY_ID = "payments\x1b]0;pwned\x07\u009b"
TOPIC_ID = str(uuid.uuid5(uuid.NAMESPACE_DNS, "payments"))
RACK = f"rack{ATTACK}"
HOSTILE = (CLIENT_ID, OTHER_CLIENT_ID, SOFTWARE_NAME, SOFTWARE_VERSION, TOPIC, TOPIC_BY_ID, RACK)

# The escaped form a human report must show: nothing dropped unseen (rich itself would drop the BEL).
SHOWN = "\\x1b]0;pwned\\x07"

BROKER = Endpoint("10.0.0.9", 9092)
SESSION = 777
NOT_FOUND = 70  # FETCH_SESSION_ID_NOT_FOUND


def _api_versions_response(version: int) -> bytes:
    mod = codec._kio_module(API_VERSIONS, version, "response")
    from kio.static.primitive import i16, i32Timedelta

    value = mod.ApiVersionsResponse(
        error_code=mod.ErrorCode.none,
        api_keys=(mod.ApiVersion(api_key=i16(FETCH), min_version=i16(4), max_version=i16(17)),),
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)))
    return codec._kio_write(API_VERSIONS, version, "response", value)


def _metadata_request(version: int) -> bytes:
    mod = codec._kio_module(METADATA, version, "request")
    value = mod.MetadataRequest(topics=(mod.MetadataRequestTopic(topic_id=None, name=TOPIC_BY_ID),),
                                allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    return codec._kio_write(METADATA, version, "request", value)


def _fetch(version: int, session_id: int, epoch: int, parts: tuple[RequestPartition, ...]) -> bytes:
    return codec.encode_request(FETCH, version, codec.FetchRequestBody(
        max_wait_ms=500, min_bytes=1, session_id=session_id, session_epoch=epoch, rack_id=RACK, partitions=parts))


def _answer(version: int, session_id: int, parts: tuple[RequestPartition, ...], error: int = 0) -> bytes:
    rows = tuple(ResponsePartition(p.topic, p.topic_id, p.partition, 0, 10, 10, 0, -1, -1, -1, 0, 0, 0, None)
                 for p in parts)
    return codec.encode_response(FETCH, version, codec.FetchResponseBody(
        error_code=error, session_id=session_id, partitions=() if error else rows))


def write_hostile_capture(path: Path, client_id: str = CLIENT_ID, other_client_id: str = OTHER_CLIENT_ID) -> Path:
    """Two clients of one broker: the first says who it is (ApiVersions v3), learns a topic id (Metadata v12),
    creates a fetch session, uses it and loses it (FETCH_SESSION_ID_NOT_FOUND); the second asks for a session
    by topic id (Fetch v13) and is refused again and again."""
    by_name = (RequestPartition(TOPIC, None, 0, 5, 1048576, -1, -1, -1),)
    by_id = (RequestPartition(TOPIC_BY_ID, TOPIC_ID, 0, 5, 1048576, -1, -1, -1),)
    with PcapWriter(path, LINKTYPE_ETHERNET) as out:
        t = 1_700_000_000.0
        first = TcpConversation(out, Endpoint("10.0.0.1", 50001), BROKER)
        t = first.handshake(t)
        calls = [
            (API_VERSIONS, 3, codec.encode_request(API_VERSIONS, 3, codec.ClientSoftware(SOFTWARE_NAME,
                                                                                       SOFTWARE_VERSION)),
             _api_versions_response(3)),
            (METADATA, 12, _metadata_request(12),
             codec.encode_response(METADATA, 12, codec.TopicNames({TOPIC_ID: TOPIC_BY_ID}))),
            (FETCH, 12, _fetch(12, 0, 0, by_name), _answer(12, SESSION, by_name)),
            (FETCH, 12, _fetch(12, SESSION, 1, ()), _answer(12, SESSION, ())),
            (FETCH, 12, _fetch(12, SESSION, 2, ()), _answer(12, 0, (), error=NOT_FOUND)),
            (FETCH, 12, _fetch(12, 0, 0, by_name), _answer(12, SESSION + 1, by_name)),
        ]
        for corr, (api, version, request, response) in enumerate(calls, start=1):
            t = first.send("client", request_frame(api, version, corr, client_id, request), t + 0.01)
            t = first.send("server", response_frame(api, version, corr, response), t + 0.002)
        t = first.close(t)
        second = TcpConversation(out, Endpoint("10.0.0.2", 50002), BROKER)
        t = second.handshake(t)
        for corr in range(1, 5):
            t = second.send("client", request_frame(FETCH, 13, corr, other_client_id, _fetch(13, 0, 0, by_id)),
                            t + 0.5)
            t = second.send("server", response_frame(FETCH, 13, corr, _answer(13, 0, by_id)), t + 0.002)
        second.close(t)
    return path
