"""The broker's non-Fetch APIs: just enough of Kafka for real producers and manually assigned consumers.

Each handler takes the broker state and a decoded kio request and returns a kio response of the same
version. Response classes come from the request's own version module, and `make` drops the fields a
version does not have, so one handler serves every version of its API.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import typing
import uuid

from kio.schema.errors import ErrorCode

from fetchtool.broker.logs import InvalidRecords, ProducerStateError
from fetchtool.broker.state import BrokerState

# api key -> (min, max) versions served: Kafka 4.3.1's ranges (ApiVersions v3 against the real broker) for every
# api implemented here, except Produce v0-v2, which kio has no layout for (see ADVERTISED). Fetch (1) is handled in
# fetch.py but listed here for ApiVersions.
SUPPORTED: dict[int, tuple[int, int]] = {
    0: (3, 13),  # Produce (v13: topics by id)
    1: (4, 18),  # Fetch (v18 adds a follower-only HighWatermark to the request)
    2: (1, 11),  # ListOffsets
    3: (0, 13),  # Metadata (v0: an empty topic list means every topic)
    8: (2, 10),  # OffsetCommit (v10: topics by id)
    9: (1, 10),  # OffsetFetch (v8+: several groups per request; v10: topics by id)
    10: (0, 6),  # FindCoordinator
    18: (0, 4),  # ApiVersions
    19: (2, 7),  # CreateTopics
    22: (0, 5),  # InitProducerId
}

# What ApiVersions advertises. Kafka 4.x still advertises Produce v0-v2 (for old clients' version negotiation)
# but closes the connection of a client that sends one, as it does for every unsupported version: so does this
# broker, because v0-v2 are outside SUPPORTED.
ADVERTISED: dict[int, tuple[int, int]] = SUPPORTED | {0: (0, 13)}

NONE = 0
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REQUIRED_ACKS = 21
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
POLICY_VIOLATION = 44
UNKNOWN_TOPIC_ID = 100
API_VERSIONS = 18

_ZERO_TD = datetime.timedelta(0)


def response_module(request: typing.Any) -> typing.Any:
    """The kio module holding the response classes for this request's api and version."""
    module = type(request).__module__.rsplit(".", 1)[0] + ".response"
    return importlib.import_module(module)


def make(cls: type, **values: typing.Any) -> typing.Any:
    """Instantiate a kio entity with the values its version has; the others are dropped.

    Error-code fields are converted to kio's ErrorCode enum (its writer needs it)."""
    names, error_fields = _fields(cls)
    kept = {k: v for k, v in values.items() if k in names}
    for name in error_fields:
        if name in kept:
            kept[name] = ErrorCode(kept[name])
    return cls(**kept)


_FIELD_CACHE: dict[type, tuple[frozenset[str], tuple[str, ...]]] = {}


def _fields(cls: type) -> tuple[frozenset[str], tuple[str, ...]]:
    cached = _FIELD_CACHE.get(cls)
    if cached is None:
        fs = dataclasses.fields(cls)
        cached = _FIELD_CACHE[cls] = (
            frozenset(f.name for f in fs),
            tuple(f.name for f in fs if f.metadata.get("kafka_type") == "error_code"),
        )
    return cached


def api_versions(state: BrokerState, request: typing.Any) -> typing.Any:
    return api_versions_response(response_module(request), NONE)


def api_versions_response(module: typing.Any, error_code: int) -> typing.Any:
    """Every advertised range; an UNSUPPORTED_VERSION answer lists ApiVersions' own range only, as Kafka's
    ApiVersionsRequest.getErrorResponse does (seen on Kafka 4.3.1)."""
    ranges = ADVERTISED if error_code == NONE else {API_VERSIONS: SUPPORTED[API_VERSIONS]}
    keys = tuple(
        make(module.ApiVersion, api_key=key, min_version=low, max_version=high)
        for key, (low, high) in sorted(ranges.items())
    )
    return make(module.ApiVersionsResponse, error_code=error_code, api_keys=keys, throttle_time=_ZERO_TD)


def metadata(state: BrokerState, request: typing.Any) -> typing.Any:
    m = response_module(request)
    auto_create = getattr(request, "allow_auto_topic_creation", True)
    if request.topics is None or (not request.topics and type(request).__version__ == 0):  # v0: [] is all
        wanted = [(t.name, t.topic_id) for t in state.topics]
    else:
        wanted = [(t.name, getattr(t, "topic_id", None)) for t in request.topics]
    topics = []
    for name, topic_id in wanted:
        topic = state.topics.get(name) if name is not None else None
        if topic is None and name is None and topic_id is not None:
            topic = state.topics.by_id(topic_id)
        if topic is None and name is not None and auto_create and state.auto_create_partitions > 0:
            topic = state.create_topic(name, state.auto_create_partitions)
        if topic is None:
            code = UNKNOWN_TOPIC_OR_PARTITION if name is not None else UNKNOWN_TOPIC_ID
            topics.append(
                make(m.MetadataResponseTopic, error_code=code, name=name, topic_id=topic_id or uuid.UUID(int=0),
                     partitions=())
            )
            continue
        partitions = tuple(
            make(m.MetadataResponsePartition, error_code=NONE, partition_index=i, leader_id=state.node_id,
                 leader_epoch=0, replica_nodes=(state.node_id,), isr_nodes=(state.node_id,), offline_replicas=())
            for i in range(len(topic.partitions))
        )
        topics.append(
            make(m.MetadataResponseTopic, error_code=NONE, name=topic.name, topic_id=topic.topic_id,
                 is_internal=False, partitions=partitions)
        )
    broker = make(m.MetadataResponseBroker, node_id=state.node_id, host=state.host, port=state.port, rack=None)
    return make(m.MetadataResponse, throttle_time=_ZERO_TD, brokers=(broker,), cluster_id=state.cluster_id,
                controller_id=state.node_id, topics=tuple(topics), error_code=NONE)


def produce(state: BrokerState, request: typing.Any) -> typing.Any:
    """Append each partition's record set; None for acks=0 (Kafka sends no response then)."""
    m = response_module(request)
    acks = int(request.acks)
    topics = []
    for t in request.topic_data:
        name, missing = _topic_name(state, t)
        partitions = []
        for p in t.partition_data:
            log = state.topics.partition(name, p.index)
            base, code = -1, NONE
            if acks not in (0, 1, -1):
                code = INVALID_REQUIRED_ACKS
            elif log is None:
                code = missing
            else:
                try:
                    appended = log.append_produced(bytes(p.records or b""))
                    base = appended.base_offset
                    if appended.duplicate is None:
                        state.appended += 1
                    else:
                        state.duplicates += 1
                        state.log.info("produce to %s-%d: a retried batch (sequence %d-%d) already at offset %d, "
                                       "acknowledged without appending it again", name, p.index,
                                       appended.duplicate.first_seq, appended.duplicate.last_seq, base)
                except InvalidRecords as exc:
                    code = CORRUPT_MESSAGE
                    state.log.info("produce to %s-%d refused: %s", name, p.index, exc)
                except ProducerStateError as exc:
                    code = exc.error_code
                    state.log.info("produce to %s-%d refused: %s", name, p.index, exc)
            partitions.append(
                make(m.PartitionProduceResponse, index=p.index, error_code=code, base_offset=base,
                     log_start_offset=log.log_start_offset if log else -1, record_errors=(), error_message=None)
            )
        topics.append(make(m.TopicProduceResponse, name=name, topic_id=getattr(t, "topic_id", None),
                           partition_responses=tuple(partitions)))
    if acks == 0:
        return None
    return make(m.ProduceResponse, responses=tuple(topics), throttle_time=_ZERO_TD)


def list_offsets(state: BrokerState, request: typing.Any) -> typing.Any:
    m = response_module(request)
    topics = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            log = state.topics.partition(t.name, p.partition_index)
            if log is None:
                partitions.append(make(m.ListOffsetsPartitionResponse, partition_index=p.partition_index,
                                       error_code=UNKNOWN_TOPIC_OR_PARTITION, timestamp=-1, offset=-1))
                continue
            partitions.append(
                make(m.ListOffsetsPartitionResponse, partition_index=p.partition_index, error_code=NONE,
                     timestamp=-1, offset=log.offset_for_timestamp(int(p.timestamp)), leader_epoch=0)
            )
        topics.append(make(m.ListOffsetsTopicResponse, name=t.name, partitions=tuple(partitions)))
    return make(m.ListOffsetsResponse, throttle_time=_ZERO_TD, topics=tuple(topics))


def find_coordinator(state: BrokerState, request: typing.Any) -> typing.Any:
    """This broker coordinates every group and transaction."""
    m = response_module(request)
    if hasattr(m, "Coordinator"):
        coordinators = tuple(
            make(m.Coordinator, key=key, node_id=state.node_id, host=state.host, port=state.port,
                 error_code=NONE, error_message=None)
            for key in request.coordinator_keys
        )
        return make(m.FindCoordinatorResponse, throttle_time=_ZERO_TD, coordinators=coordinators)
    return make(m.FindCoordinatorResponse, throttle_time=_ZERO_TD, error_code=NONE, error_message=None,
                node_id=state.node_id, host=state.host, port=state.port)


def init_producer_id(state: BrokerState, request: typing.Any) -> typing.Any:
    m = response_module(request)
    state.next_producer_id += 1
    return make(m.InitProducerIdResponse, throttle_time=_ZERO_TD, error_code=NONE,
                producer_id=state.next_producer_id, producer_epoch=0)


# Kafka's controller refuses a CreateTopics whose topics add up to more partitions than this, before allocating
# anything (ReplicationControlManager.validateTotalNumberOfPartitions: "has led to out-of-memory exceptions").
MAX_PARTITIONS_PER_BATCH = 10_000


def _partitions_asked(state: BrokerState, t: typing.Any) -> int:
    count = int(t.num_partitions)
    return max(state.auto_create_partitions, 1) if count == -1 else count


def create_topics(state: BrokerState, request: typing.Any) -> typing.Any:
    m = response_module(request)
    results = []
    too_many = sum(max(_partitions_asked(state, t), 0) for t in request.topics) > MAX_PARTITIONS_PER_BATCH
    for t in request.topics:
        count = _partitions_asked(state, t)
        code, message, topic_id = NONE, None, uuid.UUID(int=0)
        if too_many:  # the whole request fails, every topic with the same error
            code, message = POLICY_VIOLATION, "Excessively large number of partitions per request."
        elif t.name in state.topics:
            code, message = TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists."
        elif count <= 0:
            code, message = INVALID_PARTITIONS, "Number of partitions must be larger than 0."
        elif not getattr(request, "validate_only", False):
            topic_id = state.create_topic(t.name, count).topic_id
        results.append(
            make(m.CreatableTopicResult, name=t.name, topic_id=topic_id, error_code=code, error_message=message,
                 num_partitions=count if code == NONE else -1, replication_factor=1 if code == NONE else -1,
                 configs=())
        )
    return make(m.CreateTopicsResponse, throttle_time=_ZERO_TD, topics=tuple(results))


def offset_commit(state: BrokerState, request: typing.Any) -> typing.Any:
    m = response_module(request)
    topics = []
    for t in request.topics:
        name, missing = _topic_name(state, t)
        parts = []
        for p in t.partitions:
            code = NONE
            if name is None:
                code = missing
            else:
                state.committed[(request.group_id, name, p.partition_index)] = (
                    int(p.committed_offset), p.committed_metadata)
            parts.append(make(m.OffsetCommitResponsePartition, partition_index=p.partition_index, error_code=code))
        topics.append(make(m.OffsetCommitResponseTopic, name=name, topic_id=getattr(t, "topic_id", None),
                           partitions=tuple(parts)))
    return make(m.OffsetCommitResponse, throttle_time=_ZERO_TD, topics=tuple(topics))


def offset_fetch(state: BrokerState, request: typing.Any) -> typing.Any:
    m = response_module(request)
    if hasattr(request, "groups"):  # v8+: one answer per group
        groups = tuple(
            make(m.OffsetFetchResponseGroup, group_id=g.group_id, error_code=NONE,
                 topics=_committed_offsets(state, m, g.group_id, g.topics, m.OffsetFetchResponseTopics,
                                           m.OffsetFetchResponsePartitions))
            for g in request.groups
        )
        return make(m.OffsetFetchResponse, throttle_time=_ZERO_TD, groups=groups)
    topics = _committed_offsets(state, m, request.group_id, request.topics, m.OffsetFetchResponseTopic,
                                m.OffsetFetchResponsePartition)
    return make(m.OffsetFetchResponse, throttle_time=_ZERO_TD, topics=topics, error_code=NONE)


def _committed_offsets(state: BrokerState, m, group: str, requested, topic_cls: type, partition_cls: type) -> tuple:
    """The committed offsets of ``requested`` topics (None: every topic the group committed), v10 by topic id."""
    wanted: list[tuple[str | None, typing.Any, list[int]]]
    if requested is None:
        names = sorted({name for (g, name, _) in state.committed if g == group})
        wanted = [(n, None, sorted(p for (g, nn, p) in state.committed if g == group and nn == n)) for n in names]
    else:
        wanted = [(_topic_name(state, t)[0], getattr(t, "topic_id", None), list(t.partition_indexes))
                  for t in requested]
    topics = []
    for name, topic_id, indexes in wanted:
        parts = []
        for index in indexes:
            found = state.committed.get((group, name, index)) if name is not None else None
            offset, meta = found or (-1, "")
            parts.append(make(partition_cls, partition_index=index, committed_offset=offset,
                              committed_leader_epoch=-1, metadata=meta or "", error_code=NONE))
        if topic_id is None:
            topic = state.topics.get(name)
            topic_id = topic.topic_id if topic else uuid.UUID(int=0)
        topics.append(make(topic_cls, name=name, topic_id=topic_id, partitions=tuple(parts)))
    return tuple(topics)


def _topic_name(state: BrokerState, topic: typing.Any) -> tuple[str | None, int]:
    """A request topic's name (resolved from its id in the by-id versions) and the error for a partition that is
    not there: UNKNOWN_TOPIC_ID for an unknown id, else UNKNOWN_TOPIC_OR_PARTITION (as Kafka 4.3.1 answers)."""
    if hasattr(topic, "topic_id") and not hasattr(topic, "name"):
        found = state.topics.by_id(topic.topic_id)
        return (found.name, UNKNOWN_TOPIC_OR_PARTITION) if found else (None, UNKNOWN_TOPIC_ID)
    return topic.name, UNKNOWN_TOPIC_OR_PARTITION


HANDLERS: dict[int, typing.Callable[[BrokerState, typing.Any], typing.Any]] = {
    0: produce,
    2: list_offsets,
    3: metadata,
    8: offset_commit,
    9: offset_fetch,
    10: find_coordinator,
    18: api_versions,
    19: create_topics,
    22: init_producer_id,
}
