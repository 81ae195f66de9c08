"""The one codec for the message bodies fetchtool reads and writes.

decode_request / decode_response turn a body (the bytes after the header) into fetchtool's own frozen types;
encode_request / encode_response do the reverse. Layouts come from libraries generated from Kafka's JSON
schemas: kio 0.6.5 (native reader) for Fetch v4-v18, FetchSnapshot, ApiVersions and Metadata, and kafka-python
3.0.12 for Fetch v0-v3 (which kio dropped with Kafka 4.0). Everything else is only counted by the caller.
"""

from __future__ import annotations

import datetime
import io
import uuid
from dataclasses import dataclass
from functools import cache
from importlib import import_module
from typing import Literal, Mapping

from ..exchange import ForgottenPartition, RequestPartition, ResponsePartition
from .headers import API_VERSIONS, FETCH, FETCH_SNAPSHOT, METADATA, api_name

ZERO_UUID = "00000000-0000-0000-0000-000000000000"
INT32_MAX = 0x7FFFFFFF


class CodecError(ValueError):
    """A body that does not decode (truncated, trailing garbage, a null where the schema forbids one, or an
    unknown version). The only exception decode_request / decode_response raise, whatever the bytes."""


class UnsupportedApi(CodecError):
    """An (api key, version) this codec does not handle; callers just count it."""


# What a decoded Fetch body's partition tuples hold: rows (True), stand-ins that only count (False: _fetch_flex),
# or those stand-ins carrying the entries' packed fields ("packed": protocol/packed.py). Bodies the fast path does
# not read always have rows.
Rows = Literal[True, False, "packed"]

# The versions whose layout this codec knows, per api key it reads (requests; responses likewise).
FETCH_VERSIONS = range(0, 19)


@dataclass(frozen=True, slots=True)
class FetchRequestBody:
    """A Fetch or FetchSnapshot request body.

    Decoded bodies follow design.md's decode contract: a top-level field the version does not carry is None
    (MaxBytes before v3, IsolationLevel before v4, RackId before v11), except SessionId / SessionEpoch, which
    hold what Kafka decodes them as (0 / -1) before v7; fields FetchSnapshot does not have are None. The
    defaults below are what the encoders write when a caller leaves a field out (Kafka's schema defaults)."""

    replica_id: int | None = -1
    max_wait_ms: int | None = 0
    min_bytes: int | None = 0
    max_bytes: int | None = INT32_MAX
    isolation_level: int | None = 0
    session_id: int | None = 0
    session_epoch: int | None = -1
    rack_id: str | None = ""
    partitions: tuple[RequestPartition, ...] = ()
    forgotten: tuple[ForgottenPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class FetchResponseBody:
    """A Fetch or FetchSnapshot response body. `records` holds the Records blobs, parallel to `partitions`:
    decode fills it only when asked (keep_records=True); encode writes it (None: every partition null/empty)."""

    throttle_time_ms: int = 0
    error_code: int = 0
    session_id: int | None = 0
    partitions: tuple[ResponsePartition, ...] = ()
    records: tuple[bytes | None, ...] | None = None


@dataclass(frozen=True, slots=True)
class ClientSoftware:
    """ApiVersions v3+ request body (KIP-511)."""

    name: str
    version: str

    def __str__(self) -> str:
        return f"{self.name}/{self.version}"


@dataclass(frozen=True, slots=True)
class TopicNames:
    """What a Metadata response tells us: topic id (UUID string) -> topic name, for v10+ responses."""

    names: Mapping[str, str]


def _uuid_str(u: uuid.UUID | None) -> str:
    return ZERO_UUID if u is None else str(u)


def _to_uuid(s: str | None) -> uuid.UUID | None:
    if s is None or s == ZERO_UUID:
        return None
    return uuid.UUID(s)


def _ms(td: datetime.timedelta) -> int:
    return td.days * 86_400_000 + td.seconds * 1000 + td.microseconds // 1000


# -- kio plumbing -------------------------------------------------------------------------------------------
_KIO_NAMES = {FETCH: "fetch", FETCH_SNAPSHOT: "fetch_snapshot", API_VERSIONS: "api_versions", METADATA: "metadata"}
_KIO_RANGES = {FETCH: (4, 18), FETCH_SNAPSHOT: (0, 1), API_VERSIONS: (0, 4), METADATA: (0, 13)}


@cache
def _kio_module(api_key: int, version: int, kind: str):
    lo, hi = _KIO_RANGES[api_key]
    if not lo <= version <= hi:
        raise _unsupported(api_key, version, kind)
    return import_module(f"kio.schema.{_KIO_NAMES[api_key]}.v{version}.{kind}")


@cache
def _kio_entity(api_key: int, version: int, kind: str):
    return getattr(_kio_module(api_key, version, kind), _ENTITY[api_key] + kind.capitalize())


@cache
def _kio_reader(api_key: int, version: int, kind: str):
    from .kio_guard import reader  # here, not at the top: kio_guard imports CodecError from this module

    return reader(_kio_entity(api_key, version, kind))


@cache
def _kio_writer(api_key: int, version: int, kind: str):
    from kio.serial import entity_writer  # kio's serial layer (and asyncio under it) only when a body needs kio

    mod = _kio_module(api_key, version, kind)
    return entity_writer(getattr(mod, _ENTITY[api_key] + kind.capitalize()))


_ENTITY = {FETCH: "Fetch", FETCH_SNAPSHOT: "FetchSnapshot", API_VERSIONS: "ApiVersions", METADATA: "Metadata"}


def _kio_read(api_key: int, version: int, kind: str, body):
    """Every kio decode goes through here, by kio_guard's reader: kio's native reader aborts the process (not
    raises) on an array count of billions."""
    read = _kio_reader(api_key, version, kind)
    try:
        value, size = read(body)
    except Exception as exc:  # the guard's CodecError, or the native reader's assorted errors on bad input
        raise CodecError(f"{_ENTITY[api_key]} v{version} {kind}: {exc}") from None
    if size != len(body):
        raise CodecError(f"{_ENTITY[api_key]} v{version} {kind}: {len(body) - size} bytes left after the body")
    return value


def _kio_write(api_key: int, version: int, kind: str, value) -> bytes:
    buf = io.BytesIO()
    _kio_writer(api_key, version, kind)(buf, value)
    return buf.getvalue()


def _kp_decode(kind: str, version: int, body):
    # kafka-python is imported on first use: importing it costs ~0.2 s of every CLI start, and modern captures
    # (Fetch v4+) never need it.
    from kafka.protocol.consumer import fetch

    cls = fetch.FetchRequest if kind == "request" else fetch.FetchResponse
    try:
        value = cls.decode(body, version=version)
    except Exception as exc:
        raise CodecError(f"{cls.__name__} v{version}: {exc}") from None
    return value


# -- public interface ---------------------------------------------------------------------------------------
def decodes_response(api_key: int, version: int) -> bool:
    if api_key == FETCH:
        return version in FETCH_VERSIONS
    if api_key == FETCH_SNAPSHOT:
        return 0 <= version <= 1
    return api_key == METADATA and 10 <= version <= 13


def decode_request(api_key: int, version: int, body, topic_names: Mapping[str, str] | None = None,
                   rows: Rows = True):
    """FetchRequestBody for Fetch/FetchSnapshot, ClientSoftware for ApiVersions v3+; else UnsupportedApi.
    Any bytes that do not decode raise CodecError, never anything else. `rows=False`: a Fetch body's partition
    entries may be stand-ins that only count (_fetch_flex: for a caller that writes counts alone); "packed": see Rows."""
    try:
        return _decode_request(api_key, version, body, topic_names, rows)
    except CodecError:
        raise
    except Exception as exc:  # noqa: BLE001  (a library's reader failing on damaged bytes in its own way)
        raise _damaged(api_key, version, "request", exc) from None


def _damaged(api_key: int, version: int, kind: str, exc: Exception) -> CodecError:
    return CodecError(f"{api_name(api_key)} v{version} {kind}: {type(exc).__name__}: {exc}")


def _unsupported(api_key: int, version: int, kind: str) -> UnsupportedApi:
    return UnsupportedApi(f"{api_name(api_key)} v{version} {kind}: a version fetchtool does not decode")


def _decode_request(api_key: int, version: int, body, topic_names, rows: Rows = True):
    if api_key == FETCH:
        if version not in FETCH_VERSIONS:
            raise _unsupported(api_key, version, "request")
        if version >= 12:
            from ._fetch_flex import read_request

            try:
                return read_request(body, version, topic_names, rows)
            except CodecError as exc:  # damaged beyond doubt (an array count past the end): no fallback
                raise CodecError(f"Fetch v{version} request: {exc}") from None
            except Exception:  # noqa: BLE001  (not the plain shape, or damaged: kio and kafka-python judge it)
                pass
        if version >= 4:
            from ._fetch_kio import request_from_kio

            try:
                return request_from_kio(_kio_read(FETCH, version, "request", body), version, topic_names)
            except Exception:  # noqa: BLE001
                pass  # a second opinion before giving up: kio rejects values outside its enums and ranges, and
                # reads a null array (which Kafka's schema forbids) as None
        from ._fetch_legacy import request_from_kp

        return request_from_kp(_kp_decode("request", version, body), version, topic_names)
    if api_key == FETCH_SNAPSHOT:
        from ._fetch_kio import snapshot_request_from_kio

        return snapshot_request_from_kio(_kio_read(api_key, version, "request", body))
    if api_key == API_VERSIONS and 3 <= version <= 4:
        v = _kio_read(api_key, version, "request", body)
        return ClientSoftware(v.client_software_name, v.client_software_version)
    if api_key == API_VERSIONS and version > 4:
        software = _newer_client_software(body)
        if software is not None:
            return software
    raise _unsupported(api_key, version, "request")


def _newer_client_software(body) -> ClientSoftware | None:
    """An ApiVersions request newer than Kafka 4.3.1 knows (franz-go sends v5, KIP-1242: ClusterId, NodeId): its
    first two fields are ClientSoftwareName and ClientSoftwareVersion as in v3-v4 (a new version only appends
    fields); what follows is not read. The broker answers UNSUPPORTED_VERSION and the client asks again lower.
    None when the body does not start so: a layout fetchtool does not know, not a damaged one."""
    from ._fetch_flex import Unhandled, _string

    try:
        name, pos = _string(body, 0)
        version, _ = _string(body, pos)
    except (Unhandled, IndexError, UnicodeDecodeError):
        return None
    return ClientSoftware(name, version)


def decode_response(
    api_key: int,
    version: int,
    body,
    topic_names: Mapping[str, str] | None = None,
    keep_records: bool = False,
    rows: Rows = True,
):
    """FetchResponseBody for Fetch/FetchSnapshot, TopicNames for Metadata v10+; else UnsupportedApi.
    Any bytes that do not decode raise CodecError, never anything else. `rows=False`: as decode_request's."""
    try:
        return _decode_response(api_key, version, body, topic_names, keep_records, rows)
    except CodecError:
        raise
    except Exception as exc:  # noqa: BLE001  (a library's reader failing on damaged bytes in its own way)
        raise _damaged(api_key, version, "response", exc) from None


def _decode_response(api_key: int, version: int, body, topic_names, keep_records: bool, rows: Rows = True):
    if api_key == FETCH:
        if version not in FETCH_VERSIONS:
            raise _unsupported(api_key, version, "response")
        if version >= 12:
            from ._fetch_flex import read_response

            try:
                return read_response(body, version, topic_names, keep_records, rows)
            except CodecError as exc:  # damaged beyond doubt (an array count past the end): no fallback
                raise CodecError(f"Fetch v{version} response: {exc}") from None
            except Exception:  # noqa: BLE001  (not the plain shape, or damaged: kio and kafka-python judge it)
                pass
        if version >= 4:
            from ._fetch_kio import response_from_kio

            try:
                return response_from_kio(_kio_read(FETCH, version, "response", body), version, topic_names, keep_records)
            except Exception:  # noqa: BLE001
                pass  # e.g. an error code newer than kio's enum (kafka-python keeps plain ints), or a null array
        from ._fetch_legacy import response_from_kp

        return response_from_kp(_kp_decode("response", version, body), version, keep_records, topic_names)
    if api_key == FETCH_SNAPSHOT:
        from ._fetch_kio import snapshot_response_from_kio

        return snapshot_response_from_kio(_kio_read(api_key, version, "response", body), keep_records)
    if api_key == METADATA and 10 <= version <= 13:
        v = _kio_read(api_key, version, "response", body)
        return TopicNames({_uuid_str(t.topic_id): t.name for t in v.topics if t.name and t.topic_id is not None})
    raise _unsupported(api_key, version, "response")


def encode_request(api_key: int, version: int, body) -> bytes:
    """The body bytes (no header, no size) of a request; body as decode_request returns it."""
    if api_key == FETCH:
        if version < 4:
            from ._fetch_legacy import request_to_kp

            return request_to_kp(body, version).encode(version=version)
        from ._fetch_kio import request_to_kio

        return _kio_write(FETCH, version, "request", request_to_kio(body, version, _kio_module(FETCH, version, "request")))
    if api_key == FETCH_SNAPSHOT:
        from ._fetch_kio import snapshot_request_to_kio

        mod = _kio_module(api_key, version, "request")
        return _kio_write(api_key, version, "request", snapshot_request_to_kio(body, mod))
    if api_key == API_VERSIONS and 3 <= version <= 4:
        mod = _kio_module(api_key, version, "request")
        return _kio_write(
            api_key, version, "request",
            mod.ApiVersionsRequest(client_software_name=body.name, client_software_version=body.version),
        )
    raise UnsupportedApi(f"cannot encode request api key {api_key} v{version}")


def encode_response(api_key: int, version: int, body) -> bytes:
    """The body bytes (no header, no size) of a response; body as decode_response returns it."""
    if api_key == FETCH:
        if version < 4:
            from ._fetch_legacy import response_to_kp

            return response_to_kp(body, version).encode(version=version)
        from ._fetch_kio import response_to_kio

        mod = _kio_module(FETCH, version, "response")
        return _kio_write(FETCH, version, "response", response_to_kio(body, version, mod))
    if api_key == FETCH_SNAPSHOT:
        from ._fetch_kio import snapshot_response_to_kio

        mod = _kio_module(api_key, version, "response")
        return _kio_write(api_key, version, "response", snapshot_response_to_kio(body, mod))
    if api_key == METADATA and 10 <= version <= 13:
        from kio.schema.errors import ErrorCode
        from kio.static.primitive import i32Timedelta

        mod = _kio_module(api_key, version, "response")
        topics = tuple(
            mod.MetadataResponseTopic(
                error_code=ErrorCode.none, name=name, topic_id=_to_uuid(tid), partitions=()
            )
            for tid, name in body.names.items()
        )
        # v13 adds a top-level ErrorCode (KIP-1102), which the response must carry
        extra = {"error_code": ErrorCode.none} if version >= 13 else {}
        value = mod.MetadataResponse(throttle_time=i32Timedelta.parse(datetime.timedelta(0)), brokers=(), topics=topics,
                                     **extra)
        return _kio_write(api_key, version, "response", value)
    raise UnsupportedApi(f"cannot encode response api key {api_key} v{version}")

