"""The partition error codes a Fetch response carries, what each means, and what a client is expected to do.

Numbers and names are Kafka 4.3.1's org.apache.kafka.common.protocol.Errors; the reactions are the Java consumer's
(FetchCollector.handleInitializeErrors in 4.3.1), which other clients follow more or less closely.
"""

from __future__ import annotations

from dataclasses import dataclass

from fetchtool.sessions.errors import error_name


@dataclass(frozen=True, slots=True)
class PartitionCode:
    code: int
    name: str
    meaning: str
    reaction: str  # what a correct client does next


_TABLE = (
    PartitionCode(-1, "UNKNOWN_SERVER_ERROR", "the broker failed reading the partition",
                  "log a warning and fetch again; the cause is in the broker's log"),
    PartitionCode(1, "OFFSET_OUT_OF_RANGE", "the fetch offset is outside the log (deleted by retention, or the log "
                  "was truncated)", "reset the position by auto.offset.reset (or fail if it is none); with a "
                  "preferred read replica, fall back to the leader first"),
    PartitionCode(2, "CORRUPT_MESSAGE", "a record batch failed its CRC or size check",
                  "stop with an error to the application (Java raises KafkaException); fetching again does not help"),
    PartitionCode(3, "UNKNOWN_TOPIC_OR_PARTITION", "this broker does not host the partition (deleted or "
                  "reassigned, or the client's metadata is stale)", "refresh metadata and fetch from the leader it "
                  "names"),
    PartitionCode(6, "NOT_LEADER_OR_FOLLOWER", "leadership moved away from this broker",
                  "refresh metadata and fetch from the new leader"),
    PartitionCode(9, "REPLICA_NOT_AVAILABLE", "the replica asked for (KIP-392 follower fetching) is not available",
                  "refresh metadata and fetch from the leader"),
    PartitionCode(29, "TOPIC_AUTHORIZATION_FAILED", "the client's principal may not Read the topic",
                  "stop with an error to the application (Java raises TopicAuthorizationException); fix the ACLs"),
    PartitionCode(56, "KAFKA_STORAGE_ERROR", "the partition's log directory is offline on this broker",
                  "refresh metadata; leadership moves to another replica"),
    PartitionCode(74, "FENCED_LEADER_EPOCH", "the client's leader epoch is older than the broker's (a leader "
                  "change it has not seen)", "refresh metadata, then validate the position "
                  "(OffsetsForLeaderEpoch) before fetching again"),
    PartitionCode(75, "UNKNOWN_LEADER_EPOCH", "the client's leader epoch is newer than the broker's (the broker "
                  "has not applied the leader change yet)", "fetch again shortly; no metadata refresh needed"),
    PartitionCode(76, "UNSUPPORTED_COMPRESSION_TYPE", "zstd batches asked for with Fetch below v10",
                  "upgrade the client (it cannot read zstd)"),
    PartitionCode(78, "OFFSET_NOT_AVAILABLE", "a new leader's high watermark has not caught up yet",
                  "refresh metadata and fetch again"),
    PartitionCode(100, "UNKNOWN_TOPIC_ID", "this broker does not know the topic id (deleted, or re-created "
                  "with a new id)", "refresh metadata (new topic id) and fetch again"),
    PartitionCode(103, "INCONSISTENT_TOPIC_ID", "the log's topic id differs from the request's (the topic was "
                  "re-created under the same name)", "refresh metadata and fetch again"),
    PartitionCode(109, "OFFSET_MOVED_TO_TIERED_STORAGE", "the offset is only in tiered storage (KIP-405)",
                  "a follower builds its state from remote storage; consumers never get it (the broker reads "
                  "tiered storage for them)"),
)

CODES: dict[int, PartitionCode] = {c.code: c for c in _TABLE}


def name_of(code: int) -> str:
    known = CODES.get(code)
    return known.name if known is not None else error_name(code)


def reaction(code: int) -> str:
    known = CODES.get(code)
    return known.reaction if known is not None else "see Kafka's Errors table for this code"


def meaning(code: int) -> str:
    known = CODES.get(code)
    return known.meaning if known is not None else "an error Kafka does not document for Fetch partitions"
