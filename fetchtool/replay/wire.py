"""The replay driver's Fetch messages, through fetchtool.protocol.codec (the admin requests that prepare a
target are kio entities, in target.py).

Sans-IO helpers: build request frames (size + header + body) and read response bodies. The driver owns the
sockets. Offsets are rebased so a replay can run against a broker whose logs start at 0.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from fetchtool.exchange import ForgottenPartition, RequestPartition
from fetchtool.protocol import codec, messages
from fetchtool.protocol.headers import FETCH, response_body_offset
from fetchtool.sessions.metadata import FetchMetadata
from fetchtool.sessions.partitions import PartitionData, TopicIdPartition


@dataclass(frozen=True, slots=True)
class TopicMapping:
    """Captured topic names -> the target's topic ids, and offsets rebased per partition."""

    ids: dict[str, uuid.UUID]  # name -> topic id on the target (v13+)
    names: dict[str, str]  # target topic id (UUID string) -> name, for decoding v13+ responses
    base_offsets: dict[tuple[str, int], int]  # captured offset that becomes offset 0 on the target

    def rebase(self, topic: str, partition: int, offset: int) -> int:
        if offset < 0:
            return offset
        return max(0, offset - self.base_offsets.get((topic, partition), 0))


def fetch_request(version: int, correlation_id: int, client_id: str | None, metadata: FetchMetadata,
                  fetch_data: dict[TopicIdPartition, PartitionData], to_forget: list[TopicIdPartition],
                  mapping: TopicMapping, max_wait_ms: int, min_bytes: int, max_bytes: int,
                  isolation_level: int) -> bytes:
    """A whole Fetch request frame for the target."""

    def tid(topic: str | None) -> str | None:
        if version < 13 or topic is None:
            return None
        found = mapping.ids.get(topic)
        return str(found) if found is not None else None

    parts = tuple(
        RequestPartition(k.topic, tid(k.topic), k.partition, mapping.rebase(k.topic or "", k.partition, d.fetch_offset),
                         d.max_bytes, -1 if d.log_start_offset < 0 else 0, d.current_leader_epoch,
                         d.last_fetched_epoch)
        for k, d in fetch_data.items()
    )
    forgotten = tuple(ForgottenPartition(k.topic, tid(k.topic), k.partition) for k in to_forget)
    return messages.fetch_request(version, correlation_id, client_id, metadata.session_id, metadata.epoch, parts,
                                  forgotten, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                                  isolation_level=isolation_level)


def fetch_response(payload: bytes, version: int, mapping: TopicMapping) -> codec.FetchResponseBody:
    """Decode a Fetch response frame payload (after the size prefix)."""
    offset = response_body_offset(payload, FETCH, version)
    return codec.decode_response(FETCH, version, memoryview(payload)[offset:], mapping.names)
