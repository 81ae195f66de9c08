"""Kafka's KIP-227 fetch-session engine: the one place fetchtool keeps Kafka's session rules.

A faithful, deterministic port of the broker's FetchManager / FetchSession / FetchSessionCache(+Shard) and the
client's FetchSessionHandler. Pure: no I/O, time is an argument, randomness comes from an injected random.Random.
"""

from .cache import (DEFAULT_EVICTION_MS, DEFAULT_MAX_SLOTS, DEFAULT_SHARDS, EvictionMeter, FetchSessionCache,
                    FetchSessionCacheShard, SessionCreated, SessionEvent, SessionEvicted, SessionRemoved,
                    to_positive)
from .client import (LATEST_FETCH_VERSION, MAX_VERSION_WITHOUT_TOPIC_IDS, Builder, FetchRequestData,
                     FetchSessionHandler, find_missing, max_request_version)
from .errors import (FETCH_SESSION_ID_NOT_FOUND, FETCH_SESSION_TOPIC_ID_ERROR, INCONSISTENT_TOPIC_ID,
                     INVALID_FETCH_SESSION_EPOCH, NONE, NOT_LEADER_OR_FOLLOWER, TOPIC_AUTHORIZATION_FAILED,
                     UNKNOWN_SERVER_ERROR, UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION, BuilderAlreadyBuilt,
                     SessionIdOutOfRange, error_name)
from .manager import (TOPIC_IDS_MIN_VERSION, FetchContext, FetchManager, FetchOutcome, FullFetchContext,
                      IncrementalFetchContext, OutOfRangeSessionContext, SessionErrorContext,
                      SessionlessFetchContext)
from .metadata import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, MAX_INT, FetchMetadata, next_epoch
from .partitions import ZERO_UUID, PartitionData, PartitionResult, TopicIdPartition, TopicPartition
from .session import CachedPartition, FetchSession

__all__ = [
    "DEFAULT_EVICTION_MS", "DEFAULT_MAX_SLOTS", "DEFAULT_SHARDS", "EvictionMeter", "FetchSessionCache",
    "FetchSessionCacheShard", "SessionCreated", "SessionEvent", "SessionEvicted", "SessionRemoved", "to_positive",
    "LATEST_FETCH_VERSION", "MAX_VERSION_WITHOUT_TOPIC_IDS", "Builder", "FetchRequestData", "FetchSessionHandler",
    "find_missing", "max_request_version",
    "FETCH_SESSION_ID_NOT_FOUND", "FETCH_SESSION_TOPIC_ID_ERROR", "INCONSISTENT_TOPIC_ID",
    "INVALID_FETCH_SESSION_EPOCH", "NONE", "NOT_LEADER_OR_FOLLOWER", "TOPIC_AUTHORIZATION_FAILED",
    "UNKNOWN_SERVER_ERROR", "UNKNOWN_TOPIC_ID", "UNKNOWN_TOPIC_OR_PARTITION", "BuilderAlreadyBuilt",
    "SessionIdOutOfRange", "error_name",
    "TOPIC_IDS_MIN_VERSION", "FetchContext", "FetchManager", "FetchOutcome", "FullFetchContext",
    "IncrementalFetchContext", "OutOfRangeSessionContext", "SessionErrorContext", "SessionlessFetchContext",
    "FINAL_EPOCH", "INITIAL_EPOCH", "INVALID_SESSION_ID", "MAX_INT", "FetchMetadata", "next_epoch",
    "ZERO_UUID", "PartitionData", "PartitionResult", "TopicIdPartition", "TopicPartition",
    "CachedPartition", "FetchSession",
]
