"""`decode --format jsonl` rows: one JSON object per exchange, the bytes `json.dumps(jsonl_row(ex))` gives.

    for ex in exchanges:
        out.write(jsonl_line(ex))      # the object and its newline

json.dumps builds a dict per row and walks it generically: ~25 us a row with the per-partition sums, most of a
session-storm decode's output time. jsonl_line writes the same text from the Exchange's fields with one format
string. Byte-identical by construction, and checked per row: a value of any type other than the plain ones the
decoder produces (an int subclass, a NaN timestamp) sends that row through json.dumps instead.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the decode command imports this module for its help screen too: nothing of decoding here
    from fetchtool.exchange import Exchange

__all__ = ["jsonl_row", "jsonl_line", "latency_ms", "JSONL_KEYS"]

JSONL_KEYS = ("file", "request_frame", "response_frame", "ts", "response_ts", "client", "broker", "api_key",
              "api_version", "correlation_id", "client_id", "client_software", "replica_id", "session_id",
              "session_epoch", "max_wait_ms", "min_bytes", "max_bytes", "isolation_level", "partitions",
              "forgotten", "error_code", "response_session_id", "throttle_time_ms", "response_partitions",
              "partition_errors", "records_bytes", "request_bytes", "response_bytes", "latency_ms")

# json.dumps' default separators; every value is one %s, already in its JSON form
_FORMAT = "{" + ", ".join(f'"{k}": %s' for k in JSONL_KEYS) + "}\n"
_PLAIN_INTS = frozenset({int, type(None)})
_NAN_OR_INF = frozenset({float("inf"), float("-inf")})


def latency_ms(ex: Exchange) -> float | None:
    """Response time - request time in ms, rounded to the microsecond (None without a response)."""
    if ex.ts is None or ex.response_ts is None:
        return None
    return round((ex.response_ts - ex.ts) * 1000, 3)


def jsonl_row(ex: Exchange) -> dict:
    """The contract's row, and latency_ms: response time - request time (None without a response)."""
    row = ex.to_json_row()
    row["latency_ms"] = latency_ms(ex)
    return row


def _text(s: str | None) -> str:
    return "null" if s is None else encode_basestring_ascii(s)


def _float(f: float | None) -> str | None:
    """JSON's text of a float (repr), or None when json.dumps would write something else (NaN, Infinity)."""
    if f is None:
        return "null"
    if type(f) is not float or f != f or f in _NAN_OR_INF:
        return None
    return repr(f)


def jsonl_line(ex: Exchange) -> str:
    """`json.dumps(jsonl_row(ex)) + "\\n"`, several times faster."""
    ints = (ex.request_frame, ex.response_frame, ex.api_key, ex.api_version, ex.correlation_id, ex.replica_id,
            ex.session_id, ex.session_epoch, ex.max_wait_ms, ex.min_bytes, ex.max_bytes, ex.isolation_level,
            ex.error_code, ex.response_session_id, ex.throttle_time_ms, ex.partition_errors, ex.records_bytes,
            ex.request_bytes, ex.response_bytes)
    texts = (ex.file, ex.client, ex.broker, ex.client_id, ex.client_software)
    ts, response_ts = _float(ex.ts), _float(ex.response_ts)
    latency = _float(latency_ms(ex))
    if (not _PLAIN_INTS.issuperset(map(type, ints)) or ts is None or response_ts is None or latency is None
            or not all(type(t) is str or t is None for t in texts)):
        return json.dumps(jsonl_row(ex)) + "\n"  # a value json.dumps writes its own way
    (request_frame, response_frame, api_key, api_version, correlation_id, replica_id, session_id, session_epoch,
     max_wait_ms, min_bytes, max_bytes, isolation_level, error_code, response_session_id, throttle_time_ms,
     partition_errors, records_bytes, request_bytes, response_bytes) = ("null" if v is None else v for v in ints)
    file, client, broker, client_id, client_software = map(_text, texts)
    resp_count = "null" if ex.response_partitions is None else len(ex.response_partitions)
    return _FORMAT % (
        file, request_frame, response_frame, ts, response_ts, client, broker, api_key, api_version, correlation_id,
        client_id, client_software, replica_id, session_id, session_epoch, max_wait_ms, min_bytes, max_bytes,
        isolation_level, len(ex.request_partitions), len(ex.forgotten_partitions), error_code,
        response_session_id, throttle_time_ms, resp_count, partition_errors, records_bytes, request_bytes,
        response_bytes, latency)
