"""Fetch via kafka-python 3.0.12's kafka.protocol: v0-v3 (kio starts at v4), and a second opinion for any
version kio rejects (e.g. an error code newer than kio's enum).

kafka-python's classes accept every version 0-18 (its JSON marks v0-3 fields "0+"), so one mapping serves all.
kafka-python reads a null array (length -1) as None wherever it occurs; Kafka's FetchRequest.json and
FetchResponse.json declare none of these arrays nullable (no "nullableVersions"), so Kafka's generated reader
rejects such a body ("non-nullable field ... was serialized as null") and so do we: CodecError, not zero rows.
"""

from __future__ import annotations

import uuid

from kafka.protocol.consumer.fetch import FetchRequest as KpFetchRequest
from kafka.protocol.consumer.fetch import FetchResponse as KpFetchResponse

from ..exchange import ForgottenPartition, RequestPartition, ResponsePartition
from ._fetch_kio import _runs, _topic_key, request_partition_fields
from .codec import ZERO_UUID, CodecError, FetchRequestBody, FetchResponseBody
from .records import EMPTY, summarize


def _array(items, what: str, version: int, kind: str):
    if items is None:
        raise CodecError(f"Fetch v{version} {kind}: {what} is null, which Kafka's schema does not allow")
    return items


def request_from_kp(v, version: int, names=None) -> FetchRequestBody:
    rows = []
    for t in _array(v.topics, "Topics", version, "request"):
        name, tid = _topic_key(t, version, names)
        for p in _array(t.partitions, "Partitions", version, "request"):
            rows.append(RequestPartition(
                name, tid, p.partition, p.fetch_offset, p.partition_max_bytes,
                p.log_start_offset if version >= 5 else -1, p.current_leader_epoch if version >= 9 else -1,
                p.last_fetched_epoch if version >= 12 else -1,
            ))
    forgotten: list[ForgottenPartition] = []
    for t in _array(v.forgotten_topics_data, "ForgottenTopicsData", version, "request") if version >= 7 else ():
        name, tid = _topic_key(t, version, names)
        forgotten.extend(ForgottenPartition(name, tid, p) for p in _array(t.partitions, "Partitions", version, "request"))
    if version >= 15:
        rs = v.replica_state
        replica_id = -1 if rs is None else rs.replica_id
    else:
        replica_id = v.replica_id
    return FetchRequestBody(
        replica_id=replica_id, max_wait_ms=v.max_wait_ms, min_bytes=v.min_bytes,
        max_bytes=v.max_bytes if version >= 3 else None, isolation_level=v.isolation_level if version >= 4 else None,
        session_id=v.session_id if version >= 7 else 0, session_epoch=v.session_epoch if version >= 7 else -1,
        rack_id=v.rack_id if version >= 11 else None, partitions=tuple(rows), forgotten=tuple(forgotten),
    )


def response_from_kp(v, version: int, keep_records: bool, names=None) -> FetchResponseBody:
    rows = []
    blobs: list[bytes | None] | None = [] if keep_records else None
    for t in _array(v.responses, "Responses", version, "response"):
        name, tid = _topic_key(t, version, names)
        for p in _array(t.partitions, "Partitions", version, "response"):
            recs = p.records
            s = summarize(recs) if recs else EMPTY
            aborted = p.aborted_transactions if version >= 4 else None
            de = p.diverging_epoch if version >= 12 else None
            rows.append(ResponsePartition(
                name, tid, p.partition_index, p.error_code, p.high_watermark,
                p.last_stable_offset if version >= 4 else -1, p.log_start_offset if version >= 5 else -1,
                p.preferred_read_replica if version >= 11 else -1, -1 if de is None else de.epoch,
                -1 if aborted is None else len(aborted), len(recs) if recs else 0, s.batches, s.records,
                s.compression,
            ))
            if blobs is not None:
                blobs.append(None if recs is None else bytes(recs))
    return FetchResponseBody(
        throttle_time_ms=v.throttle_time_ms if version >= 1 else 0,
        error_code=v.error_code if version >= 7 else 0, session_id=v.session_id if version >= 7 else 0,
        partitions=tuple(rows), records=None if blobs is None else tuple(blobs),
    )


def _topic_kw(version: int, key) -> dict:
    name, tid = key
    if version >= 13:
        return {"topic_id": uuid.UUID(tid or ZERO_UUID)}
    return {"topic": name or ""}


def request_to_kp(b: FetchRequestBody, version: int):
    R = KpFetchRequest
    topics = []
    for key, rows in _runs(b.partitions, lambda r: (r.topic, r.topic_id)):
        parts = []
        for r in rows:
            parts.append(R.FetchTopic.FetchPartition(version=version, **request_partition_fields(r, version)))
        topics.append(R.FetchTopic(version=version, partitions=parts, **_topic_kw(version, key)))
    kw: dict[str, object] = dict(max_wait_ms=b.max_wait_ms, min_bytes=b.min_bytes, topics=topics)
    if version >= 15:
        if b.replica_id != -1:  # Kafka writes a tagged field only when it differs from its default
            kw["replica_state"] = R.ReplicaState(version=version, replica_id=b.replica_id)
    else:
        kw["replica_id"] = b.replica_id
    if version >= 3:
        kw["max_bytes"] = b.max_bytes
    if version >= 4:
        kw["isolation_level"] = b.isolation_level
    if version >= 7:
        kw["session_id"] = b.session_id
        kw["session_epoch"] = b.session_epoch
        kw["forgotten_topics_data"] = [
            R.ForgottenTopic(version=version, partitions=[r.partition for r in rows], **_topic_kw(version, key))
            for key, rows in _runs(b.forgotten, lambda r: (r.topic, r.topic_id))
        ]
    if version >= 11:
        kw["rack_id"] = b.rack_id or ""
    return R(version=version, **kw)


def response_to_kp(b: FetchResponseBody, version: int):
    S = KpFetchResponse
    blobs = b.records if b.records is not None else (None,) * len(b.partitions)
    topics = []
    for key, rows in _runs(zip(b.partitions, blobs), lambda rb: (rb[0].topic, rb[0].topic_id)):
        parts = []
        for r, blob in rows:
            kw: dict[str, object] = dict(partition_index=r.partition, error_code=r.error_code, high_watermark=r.high_watermark,
                      records=blob)
            if version >= 4:
                kw["last_stable_offset"] = r.last_stable_offset
                kw["aborted_transactions"] = None if r.aborted_transactions < 0 else [
                    S.FetchableTopicResponse.PartitionData.AbortedTransaction(
                        version=version, producer_id=i, first_offset=0)
                    for i in range(r.aborted_transactions)
                ]
            if version >= 5:
                kw["log_start_offset"] = r.log_start_offset
            if version >= 11:
                kw["preferred_read_replica"] = r.preferred_read_replica
            if version >= 12 and r.diverging_epoch != -1:
                kw["diverging_epoch"] = S.FetchableTopicResponse.PartitionData.EpochEndOffset(
                    version=version, epoch=r.diverging_epoch, end_offset=-1)
            parts.append(S.FetchableTopicResponse.PartitionData(version=version, **kw))
        topics.append(S.FetchableTopicResponse(version=version, partitions=parts, **_topic_kw(version, key)))
    kw = dict(responses=topics)
    if version >= 1:
        kw["throttle_time_ms"] = b.throttle_time_ms
    if version >= 7:
        kw["error_code"] = b.error_code
        kw["session_id"] = b.session_id
    return S(version=version, **kw)
