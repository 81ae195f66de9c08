"""The decoder's output: one Exchange per Fetch (api key 1) or FetchSnapshot (api key 59) request/response pair.

This is the contract between decoding and everything downstream (JSONL, Parquet tables, session tracking,
findings, savings, replay). Top-level fields are exactly the `fetchtool decode --format jsonl` keys of
design.md; the partition tuples carry the per-partition detail for the partitions table and the analysis.
Fields that do not apply, or were not captured (e.g. a request whose response is missing), are None.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import countOf, itemgetter
from typing import NamedTuple

FETCH = 1
FETCH_SNAPSHOT = 59


class RequestPartition(NamedTuple):
    """A partition entry of a Fetch request (or a FetchSnapshot request: see the snapshot_* fields)."""

    topic: str | None  # None when only the topic id is on the wire and no Metadata named it
    topic_id: str | None  # UUID string for v13+, else None
    partition: int
    fetch_offset: int  # FetchSnapshot: Position
    partition_max_bytes: int  # FetchSnapshot: -1
    log_start_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    snapshot_end_offset: int = -1  # FetchSnapshot only
    snapshot_epoch: int = -1  # FetchSnapshot only


class ForgottenPartition(NamedTuple):
    topic: str | None
    topic_id: str | None
    partition: int


class ResponsePartition(NamedTuple):
    """A partition entry of a Fetch response (or FetchSnapshot response)."""

    topic: str | None
    topic_id: str | None
    partition: int
    error_code: int
    high_watermark: int  # FetchSnapshot: snapshot Size
    last_stable_offset: int
    log_start_offset: int  # FetchSnapshot: Position
    preferred_read_replica: int
    diverging_epoch: int  # -1 when absent
    aborted_transactions: int  # count; -1 when null
    records_bytes: int  # length of the Records blob (0 when null/empty)
    record_batches: int  # whole batches in the blob (a trailing partial batch is not counted)
    record_count: int  # sum of the whole batches' record counts (from batch headers, never decompressed)
    compression: str | None  # "none", "gzip", "snappy", "lz4", "zstd", "mixed", or None when no batch
    snapshot_end_offset: int = -1  # FetchSnapshot only
    snapshot_epoch: int = -1  # FetchSnapshot only


# Read per response partition in C: JSONL and Parquet rows count them for every exchange.
_error_code = itemgetter(ResponsePartition._fields.index("error_code"))
_records_bytes = itemgetter(ResponsePartition._fields.index("records_bytes"))


@dataclass(frozen=True, slots=True)
class Exchange:
    file: str
    conn: int  # connection instance id within the decode run
    request_frame: int | None
    response_frame: int | None
    ts: float | None
    response_ts: float | None
    client: str  # "ip:port"
    broker: str  # "ip:port"
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_software: str | None  # "name/version" from ApiVersions v3+ on this connection, if seen
    replica_id: int | None
    session_id: int | None
    session_epoch: int | None
    max_wait_ms: int | None
    min_bytes: int | None
    max_bytes: int | None
    isolation_level: int | None
    rack_id: str | None
    error_code: int | None
    response_session_id: int | None
    throttle_time_ms: int | None
    request_bytes: int | None  # whole frame incl. the 4-byte size
    response_bytes: int | None
    request_partitions: tuple[RequestPartition, ...] = ()
    forgotten_partitions: tuple[ForgottenPartition, ...] = ()
    response_partitions: tuple[ResponsePartition, ...] | None = None  # None when the response is missing

    # -- the derived JSONL counters ------------------------------------------------------------------
    @property
    def partitions(self) -> int:
        return len(self.request_partitions)

    @property
    def forgotten(self) -> int:
        return len(self.forgotten_partitions)

    @property
    def response_partition_count(self) -> int | None:
        return None if self.response_partitions is None else len(self.response_partitions)

    @property
    def partition_errors(self) -> int | None:
        resp = self.response_partitions
        return None if resp is None else len(resp) - countOf(map(_error_code, resp), 0)

    @property
    def records_bytes(self) -> int | None:
        resp = self.response_partitions
        return None if resp is None else sum(map(_records_bytes, resp))

    def to_json_row(self) -> dict:
        """The `decode --format jsonl` object (design.md contract)."""
        return {
            "file": self.file,
            "request_frame": self.request_frame,
            "response_frame": self.response_frame,
            "ts": self.ts,
            "response_ts": self.response_ts,
            "client": self.client,
            "broker": self.broker,
            "api_key": self.api_key,
            "api_version": self.api_version,
            "correlation_id": self.correlation_id,
            "client_id": self.client_id,
            "client_software": self.client_software,
            "replica_id": self.replica_id,
            "session_id": self.session_id,
            "session_epoch": self.session_epoch,
            "max_wait_ms": self.max_wait_ms,
            "min_bytes": self.min_bytes,
            "max_bytes": self.max_bytes,
            "isolation_level": self.isolation_level,
            "partitions": self.partitions,
            "forgotten": self.forgotten,
            "error_code": self.error_code,
            "response_session_id": self.response_session_id,
            "throttle_time_ms": self.throttle_time_ms,
            "response_partitions": self.response_partition_count,
            "partition_errors": self.partition_errors,
            "records_bytes": self.records_bytes,
            "request_bytes": self.request_bytes,
            "response_bytes": self.response_bytes,
        }
