"""Kafka error codes the session engine produces or reacts to (org.apache.kafka.common.protocol.Errors)."""

from __future__ import annotations

NONE = 0
UNKNOWN_SERVER_ERROR = -1
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
TOPIC_AUTHORIZATION_FAILED = 29
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
UNKNOWN_TOPIC_ID = 100
INCONSISTENT_TOPIC_ID = 103
FETCH_SESSION_TOPIC_ID_ERROR = 106

ERROR_NAMES: dict[int, str] = {
    NONE: "NONE",
    UNKNOWN_SERVER_ERROR: "UNKNOWN_SERVER_ERROR",
    UNKNOWN_TOPIC_OR_PARTITION: "UNKNOWN_TOPIC_OR_PARTITION",
    NOT_LEADER_OR_FOLLOWER: "NOT_LEADER_OR_FOLLOWER",
    TOPIC_AUTHORIZATION_FAILED: "TOPIC_AUTHORIZATION_FAILED",
    FETCH_SESSION_ID_NOT_FOUND: "FETCH_SESSION_ID_NOT_FOUND",
    INVALID_FETCH_SESSION_EPOCH: "INVALID_FETCH_SESSION_EPOCH",
    UNKNOWN_TOPIC_ID: "UNKNOWN_TOPIC_ID",
    INCONSISTENT_TOPIC_ID: "INCONSISTENT_TOPIC_ID",
    FETCH_SESSION_TOPIC_ID_ERROR: "FETCH_SESSION_TOPIC_ID_ERROR",
}


def error_name(code: int) -> str:
    """The Kafka name of an error code, or ``ERROR_<code>`` for codes the engine does not know."""
    return ERROR_NAMES.get(code, f"ERROR_{code}")


class SessionIdOutOfRange(IndexError):
    """A client-supplied session id indexes outside the shard list.

    Kafka's ``FetchSessionCache.getCacheShard`` does ``cacheShards.get(id / sessionIdRange)`` and the JVM throws
    IndexOutOfBoundsException; FetchManager turns that into an UNKNOWN_SERVER_ERROR response (inferred, see
    manager.OutOfRangeSessionContext).
    """

    def __init__(self, session_id: int, shards: int) -> None:
        super().__init__(f"session id {session_id} is outside the {shards} cache shard(s)")
        self.session_id = session_id


class BuilderAlreadyBuilt(RuntimeError):
    """``FetchSessionHandler.Builder.build()`` was called twice (Kafka throws an NPE there)."""
