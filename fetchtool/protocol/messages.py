"""Whole Kafka message frames (int32 size + header + body) for the code that writes them: the replay driver,
the scenario generator, the benchmark capture.

Sans-IO: bytes out. Bodies come from fetchtool.protocol.codec, headers from fetchtool.protocol.headers.
"""

from __future__ import annotations

from struct import Struct
from typing import Iterable

from ..exchange import ForgottenPartition, RequestPartition
from . import codec
from .headers import FETCH, encode_request_header, encode_response_header

_SIZE = Struct(">i")


def request_frame(api_key: int, version: int, correlation_id: int, client_id: str | None, body: bytes) -> bytes:
    payload = encode_request_header(api_key, version, correlation_id, client_id) + body
    return _SIZE.pack(len(payload)) + payload


def response_frame(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    payload = encode_response_header(api_key, version, correlation_id) + body
    return _SIZE.pack(len(payload)) + payload


def fetch_request(version: int, correlation_id: int, client_id: str | None, session_id: int, epoch: int,
                  partitions: Iterable[RequestPartition], forgotten: Iterable[ForgottenPartition] = (), *,
                  max_wait_ms: int = 500, min_bytes: int = 1, max_bytes: int = 52_428_800,
                  isolation_level: int = 0) -> bytes:
    """A consumer's whole Fetch request frame (replica id -1, no rack id)."""
    body = codec.FetchRequestBody(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
        isolation_level=isolation_level, session_id=session_id, session_epoch=epoch, rack_id="",
        partitions=tuple(partitions), forgotten=tuple(forgotten),
    )
    return request_frame(FETCH, version, correlation_id, client_id, codec.encode_request(FETCH, version, body))
