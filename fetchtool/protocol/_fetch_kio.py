"""Fetch v4-v18 and FetchSnapshot v0-v1: kio entities <-> fetchtool's row types.

The decode loops run once per partition entry of every captured fetch, so they are kept flat: local
lookups, no per-field helper calls, records summarised straight from the blob kio hands back.
"""

from __future__ import annotations

import datetime
from operator import attrgetter
from typing import Callable, Iterable, TypeVar

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

from ..exchange import ForgottenPartition, RequestPartition, ResponsePartition
from .codec import INT32_MAX, ZERO_UUID, FetchRequestBody, FetchResponseBody, _ms, _to_uuid
from .records import EMPTY, summarize


def _topic_key(t, version: int, names):
    if version >= 13:
        tid = ZERO_UUID if t.topic_id is None else str(t.topic_id)
        return (names.get(tid) if names else None), tid
    return t.topic, None


# Flexible versions (v12+) carry every partition field: one C-level attrgetter call per entry, and the row
# tuples are made with tuple.__new__ (the NamedTuple's Python __new__ costs as much as the rest of the loop).
_REQ_FIELDS = attrgetter("partition", "fetch_offset", "partition_max_bytes", "log_start_offset",
                         "current_leader_epoch", "last_fetched_epoch")
_RESP_FIELDS = attrgetter("partition_index", "error_code", "high_watermark", "last_stable_offset", "log_start_offset",
                          "preferred_read_replica", "diverging_epoch", "aborted_transactions", "records")
_new = tuple.__new__
_NO_SNAPSHOT = (-1, -1)  # RequestPartition's snapshot_end_offset, snapshot_epoch


def request_from_kio(v, version: int, names) -> FetchRequestBody:
    rows: list[RequestPartition] = []
    append = rows.append
    RP = RequestPartition
    if version >= 12:
        get = _REQ_FIELDS
        for t in v.topics:
            head = _topic_key(t, version, names)
            rows.extend([_new(RP, head + get(p) + _NO_SNAPSHOT) for p in t.partitions])
    else:
        has_lso, has_cle = version >= 5, version >= 9
        for t in v.topics:
            name, tid = _topic_key(t, version, names)
            for p in t.partitions:
                append(RP(name, tid, p.partition, p.fetch_offset, p.partition_max_bytes,
                          p.log_start_offset if has_lso else -1, p.current_leader_epoch if has_cle else -1, -1))
    forgotten: list[ForgottenPartition] = []
    for t in v.forgotten_topics_data if version >= 7 else ():
        name, tid = _topic_key(t, version, names)
        forgotten.extend(ForgottenPartition(name, tid, p) for p in t.partitions)
    replica_id = v.replica_state.replica_id if version >= 15 else v.replica_id
    return FetchRequestBody(
        replica_id=replica_id, max_wait_ms=_ms(v.max_wait), min_bytes=v.min_bytes, max_bytes=v.max_bytes,
        isolation_level=v.isolation_level, session_id=v.session_id if version >= 7 else 0,
        session_epoch=v.session_epoch if version >= 7 else -1, rack_id=v.rack_id if version >= 11 else None,
        partitions=tuple(rows), forgotten=tuple(forgotten),
    )


def response_from_kio(v, version: int, names, keep_records: bool) -> FetchResponseBody:
    rows: list[ResponsePartition] = []
    append = rows.append
    blobs: list[bytes | None] | None = [] if keep_records else None
    RP = ResponsePartition
    if version >= 12:
        get = _RESP_FIELDS
        for t in v.responses:
            name, tid = _topic_key(t, version, names)
            for p in t.partitions:
                index, err, hw, lso, log_start, prr, diverging, aborted, recs = get(p)
                if recs:
                    n = len(recs)
                    batches, count, compression, _partial = summarize(recs)
                else:
                    n = batches = count = 0
                    compression = None
                append(_new(RP, (name, tid, index, int(err), hw, lso, log_start, prr, diverging.epoch,
                                 -1 if aborted is None else len(aborted), n, batches, count, compression, -1, -1)))
                if blobs is not None:
                    blobs.append(recs)
    else:
        has_lso, has_prr = version >= 5, version >= 11
        for t in v.responses:
            name, tid = _topic_key(t, version, names)
            for p in t.partitions:
                recs = p.records
                s = summarize(recs) if recs else EMPTY
                aborted = p.aborted_transactions
                append(RP(
                    name, tid, p.partition_index, int(p.error_code), p.high_watermark, p.last_stable_offset,
                    p.log_start_offset if has_lso else -1, p.preferred_read_replica if has_prr else -1, -1,
                    -1 if aborted is None else len(aborted), len(recs) if recs else 0, s.batches, s.records,
                    s.compression,
                ))
                if blobs is not None:
                    blobs.append(recs)
    return FetchResponseBody(
        throttle_time_ms=_ms(v.throttle_time), error_code=int(v.error_code) if version >= 7 else 0,
        session_id=v.session_id if version >= 7 else 0, partitions=tuple(rows),
        records=None if blobs is None else tuple(blobs),
    )


def snapshot_request_from_kio(v) -> FetchRequestBody:
    rows = tuple(
        RequestPartition(t.name, None, p.partition, p.position, -1, -1, p.current_leader_epoch, -1,
                         p.snapshot_id.end_offset, p.snapshot_id.epoch)
        for t in v.topics for p in t.partitions
    )
    return FetchRequestBody(
        replica_id=v.replica_id, max_wait_ms=None, min_bytes=None, max_bytes=v.max_bytes, isolation_level=None,
        session_id=None, session_epoch=None, rack_id=None, partitions=rows,
    )


def snapshot_response_from_kio(v, keep_records: bool) -> FetchResponseBody:
    rows = []
    blobs: list[bytes | None] | None = [] if keep_records else None
    for t in v.topics:
        for p in t.partitions:
            recs = p.unaligned_records
            s = summarize(recs) if recs else EMPTY
            rows.append(ResponsePartition(
                t.name, None, p.index, int(p.error_code), p.size, -1, p.position, -1, -1, -1,
                len(recs) if recs else 0, s.batches, s.records, s.compression,
                p.snapshot_id.end_offset, p.snapshot_id.epoch,
            ))
            if blobs is not None:
                blobs.append(recs)
    return FetchResponseBody(
        throttle_time_ms=_ms(v.throttle_time), error_code=int(v.error_code), session_id=None,
        partitions=tuple(rows), records=None if blobs is None else tuple(blobs),
    )


# -- encoding -----------------------------------------------------------------------------------------------
_Row = TypeVar("_Row")
_Key = TypeVar("_Key")


def _runs(rows: Iterable[_Row], key: Callable[[_Row], _Key]) -> list[tuple[_Key, list[_Row]]]:
    """Consecutive rows with the same topic form one topic entry on the wire."""
    out: list[tuple[_Key, list[_Row]]] = []
    for r in rows:
        k = key(r)
        if out and out[-1][0] == k:
            out[-1][1].append(r)
        else:
            out.append((k, [r]))
    return out


def _td(ms: int | None) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=ms or 0))


def _topic_kwargs(version: int, key) -> dict:
    name, tid = key
    if version >= 13:
        return {"topic_id": _to_uuid(tid or ZERO_UUID)}
    return {"topic": name or ""}


def request_partition_fields(r: RequestPartition, version: int) -> dict:
    """A request partition's fields as both libraries name them, for the fields `version` has."""
    kw = dict(partition=r.partition, fetch_offset=r.fetch_offset, partition_max_bytes=r.partition_max_bytes)
    if version >= 5:
        kw["log_start_offset"] = r.log_start_offset
    if version >= 9:
        kw["current_leader_epoch"] = r.current_leader_epoch
    if version >= 12:
        kw["last_fetched_epoch"] = r.last_fetched_epoch
    return kw


def request_to_kio(b: FetchRequestBody, version: int, mod):
    topics = []
    for key, rows in _runs(b.partitions, lambda r: (r.topic, r.topic_id)):
        parts = []
        for r in rows:
            parts.append(mod.FetchPartition(**request_partition_fields(r, version)))
        topics.append(mod.FetchTopic(partitions=tuple(parts), **_topic_kwargs(version, key)))
    kw: dict[str, object] = dict(max_wait=_td(b.max_wait_ms), min_bytes=b.min_bytes, topics=tuple(topics))
    if version >= 15:
        kw["replica_state"] = mod.ReplicaState(replica_id=b.replica_id)
    else:
        kw["replica_id"] = b.replica_id
    kw["max_bytes"] = b.max_bytes
    kw["isolation_level"] = b.isolation_level
    if version >= 7:
        kw["session_id"] = b.session_id
        kw["session_epoch"] = b.session_epoch
        kw["forgotten_topics_data"] = tuple(
            mod.ForgottenTopic(partitions=tuple(r.partition for r in rows), **_topic_kwargs(version, key))
            for key, rows in _runs(b.forgotten, lambda r: (r.topic, r.topic_id))
        )
    if version >= 11:
        kw["rack_id"] = b.rack_id or ""
    return mod.FetchRequest(**kw)


def response_to_kio(b: FetchResponseBody, version: int, mod):
    blobs = b.records if b.records is not None else (None,) * len(b.partitions)
    topics = []
    for key, rows in _runs(zip(b.partitions, blobs), lambda rb: (rb[0].topic, rb[0].topic_id)):
        parts = []
        for r, blob in rows:
            kw: dict[str, object] = dict(
                partition_index=r.partition, error_code=ErrorCode(r.error_code), high_watermark=r.high_watermark,
                last_stable_offset=r.last_stable_offset, records=blob,
                aborted_transactions=None if r.aborted_transactions < 0 else tuple(
                    mod.AbortedTransaction(producer_id=i, first_offset=0) for i in range(r.aborted_transactions)
                ),
            )
            if version >= 5:
                kw["log_start_offset"] = r.log_start_offset
            if version >= 11:
                kw["preferred_read_replica"] = r.preferred_read_replica
            if version >= 12 and r.diverging_epoch != -1:
                kw["diverging_epoch"] = mod.EpochEndOffset(epoch=r.diverging_epoch)
            parts.append(mod.PartitionData(**kw))
        topics.append(mod.FetchableTopicResponse(partitions=tuple(parts), **_topic_kwargs(version, key)))
    kw = dict(throttle_time=_td(b.throttle_time_ms), responses=tuple(topics))
    if version >= 7:
        kw["error_code"] = ErrorCode(b.error_code)
        kw["session_id"] = b.session_id
    return mod.FetchResponse(**kw)


def snapshot_request_to_kio(b: FetchRequestBody, mod):
    topics = []
    for (name, _), rows in _runs(b.partitions, lambda r: (r.topic, r.topic_id)):
        parts = tuple(
            mod.PartitionSnapshot(
                partition=r.partition, current_leader_epoch=r.current_leader_epoch, position=r.fetch_offset,
                snapshot_id=mod.SnapshotId(end_offset=r.snapshot_end_offset, epoch=r.snapshot_epoch),
            )
            for r in rows
        )
        topics.append(mod.TopicSnapshot(name=name or "", partitions=parts))
    return mod.FetchSnapshotRequest(
        replica_id=-1 if b.replica_id is None else b.replica_id,
        max_bytes=INT32_MAX if b.max_bytes is None else b.max_bytes, topics=tuple(topics),
    )


def snapshot_response_to_kio(b: FetchResponseBody, mod):
    blobs = b.records if b.records is not None else (None,) * len(b.partitions)
    topics = []
    for (name, _), rows in _runs(zip(b.partitions, blobs), lambda rb: (rb[0].topic, rb[0].topic_id)):
        parts = tuple(
            mod.PartitionSnapshot(
                index=r.partition, error_code=ErrorCode(r.error_code), size=r.high_watermark,
                position=r.log_start_offset, unaligned_records=blob or b"",
                snapshot_id=mod.SnapshotId(end_offset=r.snapshot_end_offset, epoch=r.snapshot_epoch),
                current_leader=mod.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
            )
            for r, blob in rows
        )
        topics.append(mod.TopicSnapshot(name=name or "", partitions=parts))
    return mod.FetchSnapshotResponse(
        throttle_time=_td(b.throttle_time_ms), error_code=ErrorCode(b.error_code), topics=tuple(topics),
    )
