"""Kafka framing for the broker: request frames in, response frames out, every layout from kio.

Sans-IO: `decode_request(frame)` takes one frame body (without its int32 size prefix) and returns a
`Request`; `encode_response(...)` returns the whole frame (size prefix included). Nothing here knows about
sockets. Errors are `WireError` subclasses carrying one line a support engineer can read.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
import typing
import uuid
from dataclasses import dataclass

from kio.schema.errors import ErrorCode
from kio.index import load_request_schema, load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import EntityField, EntityTupleField, classify_field, is_optional

from fetchtool.protocol import kio_guard

_SIZE = struct.Struct(">i")

_read_header_v1 = entity_reader(RequestHeaderV1)
_read_header_v2 = entity_reader(RequestHeaderV2)


class WireError(Exception):
    """A frame that cannot be answered normally (the message is one line for the log)."""


class MalformedFrame(WireError):
    pass


class UnknownApiKey(WireError):
    pass


class UnsupportedVersion(WireError):
    """Header parsed, but the (api key, version) pair is not served. `header` is set for the error answer."""

    def __init__(self, message: str, header: RequestHeaderV1, body: bytes) -> None:
        super().__init__(message)
        self.header = header
        self.body = body


@dataclass(frozen=True, slots=True)
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: typing.Any  # a kio request entity


def peek_header(frame: bytes) -> RequestHeaderV1:
    """The api key, version, correlation id and client id: the part common to header v1 and v2."""
    try:
        header, _ = _read_header_v1(frame, 0)
    except Exception as exc:  # kio raises SerialError, UnicodeDecodeError, ValueError...
        raise MalformedFrame(f"unreadable request header ({type(exc).__name__}: {exc})") from None
    return header


def decode_request(frame: bytes, supported: typing.Mapping[int, tuple[int, int]]) -> Request:
    """Decode one request frame body. `supported` maps api key -> (min, max) version this broker serves."""
    header = peek_header(frame)
    key, version = int(header.request_api_key), int(header.request_api_version)
    if key not in supported:
        raise UnknownApiKey(f"unknown api key {key} (version {version})")
    low, high = supported[key]
    if not low <= version <= high:
        raise UnsupportedVersion(f"api key {key} version {version} not in {low}-{high}", header, frame)
    schema = load_request_schema(key, version)
    try:
        if schema.__header_schema__ is RequestHeaderV2:
            _, offset = _read_header_v2(frame, 0)
        else:
            _, offset = _read_header_v1(frame, 0)
        body, size = kio_guard.reader(schema)(frame, offset)  # an absurd array count must not abort the broker
    except Exception as exc:
        raise MalformedFrame(f"api key {key} v{version}: unreadable body ({type(exc).__name__}: {exc})") from None
    if offset + size != len(frame):
        raise MalformedFrame(
            f"api key {key} v{version}: {len(frame) - offset - size} trailing bytes after the body"
        )
    null = null_where_forbidden(body)
    if null is not None:
        # Kafka's generated readers refuse this ("non-nullable field topics was serialized as null"): the request
        # cannot be parsed, and SocketServer closes the connection without an answer (seen on Kafka 4.3.1).
        raise MalformedFrame(f"api key {key} v{version}: non-nullable field {null} was serialized as null")
    return Request(key, version, int(header.correlation_id), header.client_id, body)


# Per entity type: (field name, may be null, nested entity type or None, whether it is an array of them), for the
# fields that can hold a null at all (strings, bytes, arrays, records, entities; kio reads the zero uuid as None,
# so uuids are left out).
_NullChecks = tuple[tuple[str, bool, typing.Any, bool], ...]
_NULL_CHECKS: dict[type, _NullChecks] = {}
_NEVER_NULL = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float64",
                         "bool", "error_code", "timedelta_i32", "timedelta_i64", "datetime_i64", "uuid"})


def _null_checks(entity_type: type) -> _NullChecks:
    checks = _NULL_CHECKS.get(entity_type)
    if checks is None:
        _NULL_CHECKS[entity_type] = ()  # a cycle (none in kio's schemas) ends here
        out = []
        for f in dataclasses.fields(entity_type):
            kind = classify_field(f)
            nested = kind.type_ if isinstance(kind, (EntityField, EntityTupleField)) else None
            if nested is None and f.metadata.get("kafka_type") in _NEVER_NULL:
                continue
            if nested is not None and not _null_checks(nested):
                nested = None  # nothing inside can be null: its elements need no visit
            if nested is None and is_optional(f):
                continue
            out.append((f.name, is_optional(f), nested, kind.is_array))
        checks = _NULL_CHECKS[entity_type] = tuple(out)
    return checks


def null_where_forbidden(entity: typing.Any, path: str = "") -> str | None:
    """The first field of a decoded request holding a null its schema does not allow (kio reads one without
    complaint), as a dotted path; None when there is none."""
    for name, nullable, nested, is_array in _null_checks(type(entity)):
        value = getattr(entity, name)
        if value is None:
            if not nullable:
                return path + name
            continue
        if nested is None:
            continue
        for item in (value if is_array else (value,)):
            found = null_where_forbidden(item, f"{path}{name}.")
            if found is not None:
                return found
    return None


def encode_response(correlation_id: int, response: typing.Any) -> bytes:
    """Frame a kio response entity with the header version its schema names (ApiVersions: always v0)."""
    return _frame(response, correlation_id=correlation_id)


def encode_request(api_key: int, correlation_id: int, request: typing.Any, client_id: str | None = "fetchtool") -> bytes:
    """Frame a kio request entity (used by tests, the benchmark and the replay driver)."""
    return _frame(request, request_api_key=api_key, request_api_version=type(request).__version__,
                  correlation_id=correlation_id, client_id=client_id)


def _frame(entity: typing.Any, **header: typing.Any) -> bytes:
    """Size prefix + the header its schema names (built from `header`) + the entity."""
    header_schema = type(entity).__header_schema__
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    entity_writer(header_schema)(buf, header_schema(**header))
    entity_writer(type(entity))(buf, entity)
    data = buf.getbuffer()
    _SIZE.pack_into(data, 0, len(data) - 4)
    del data
    return buf.getvalue()


def decode_response(frame: bytes, api_key: int, api_version: int) -> tuple[int, typing.Any]:
    """(correlation id, kio response entity) of one response frame body (without the size prefix)."""
    schema = load_response_schema(api_key, api_version)
    header, offset = entity_reader(schema.__header_schema__)(frame, 0)
    body, _ = kio_guard.reader(schema)(frame, offset)  # a damaged answer raises instead of aborting the replay
    return int(header.correlation_id), body


def zero_entity(entity_type: type, error_code: int = 0) -> typing.Any:
    """An instance of a kio entity with every field without a default at its zero value (nested recursively)."""
    hints = typing.get_type_hints(entity_type)
    values: dict[str, typing.Any] = {}
    for f in dataclasses.fields(entity_type):
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            continue
        kafka_type = f.metadata.get("kafka_type")
        hint = hints[f.name]
        if kafka_type == "error_code":
            values[f.name] = ErrorCode(error_code)
        elif typing.get_origin(hint) is tuple or _optional_tuple(hint):
            values[f.name] = ()
        elif kafka_type in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float64"):
            values[f.name] = 0
        elif kafka_type in ("timedelta_i32", "timedelta_i64"):
            values[f.name] = datetime.timedelta(0)
        elif kafka_type == "string":
            values[f.name] = ""
        elif kafka_type in ("bytes", "records"):
            values[f.name] = b""
        elif kafka_type == "bool":
            values[f.name] = False
        elif kafka_type == "uuid":
            values[f.name] = uuid.UUID(int=0)
        elif isinstance(hint, type) and dataclasses.is_dataclass(hint):
            values[f.name] = zero_entity(hint, error_code)
        else:
            values[f.name] = None
    return entity_type(**values)


def _optional_tuple(hint: typing.Any) -> bool:
    return any(typing.get_origin(a) is tuple for a in typing.get_args(hint))
