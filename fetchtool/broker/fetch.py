"""Fetch handling: request -> session context (fetchtool.sessions) -> KIP-74 log reads -> response.

The session rules live in fetchtool.sessions only; this module does what KafkaApis.handleFetchRequest and
ReplicaManager.fetchMessages/readFromLog do around them:
  1. turn the request into fetch_data / to_forget (v13+: topic ids resolved through the topic map),
  2. ask FetchManager.new_context,
  3. read the context's partitions in its order with the KIP-74 byte limits; unknown topics/partitions are
     "erroneous" and go after the readable ones,
  4. answer at once, or park as a delayed fetch (MaxWaitMs / MinBytes) that the server completes later,
  5. update_and_generate_response, and encode exactly the partitions the outcome lists.
Sans-IO: time comes in as now_ms; the server owns the waiting.

Steps: a Fetch of hundreds of thousands of partitions takes seconds of CPU. `begin_steps` and `complete_steps` are
generators that yield between slices of SLICE partitions, so the server can answer other clients in between (each
session-engine call stays whole: a context is built and answered atomically, as under Kafka's session lock);
`begin` and `complete` run them to the end for sans-IO callers.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import random
import typing
from dataclasses import dataclass

from fetchtool.broker.apis import make, response_module
from fetchtool.broker.state import BrokerState
from fetchtool.broker.wire import Request
from fetchtool.sessions import (
    UNKNOWN_SERVER_ERROR,
    ZERO_UUID,
    FetchManager,
    FetchMetadata,
    FetchSessionCache,
    FullFetchContext,
    PartitionData,
    PartitionResult,
    TopicIdPartition,
)
from fetchtool.sessions.errors import error_name

T = typing.TypeVar("T")

NOT_LEADER_OR_FOLLOWER = 6
UNKNOWN_TOPIC_OR_PARTITION = 3
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
UNKNOWN_TOPIC_ID = 100
LEADER_EPOCH = 0  # every partition's leader epoch: one broker, never re-elected (Metadata says the same)
SLICE = 1024  # partitions handled between two yields of a stepped fetch (a few ms of CPU)

Steps = typing.Generator[None, None, T]


def run_steps(steps: Steps[T]) -> T:
    """Run a stepped computation to its end, without yielding to anyone."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return typing.cast(T, done.value)


@dataclass(frozen=True, slots=True)
class FetchSeen:
    """One Fetch as the broker saw and answered it (for tests, metrics and replay comparison)."""

    client: str
    client_id: str | None
    version: int
    session_id: int
    epoch: int
    context: str  # sessionless | full | incremental | error
    error_code: int
    response_session_id: int
    request_partitions: int
    response_partitions: int
    records_bytes: int


@dataclass(slots=True)
class PendingFetch:
    """A fetch whose context exists (session epoch already advanced) and whose response is not built yet."""

    request: Request
    client: str
    context: typing.Any
    readable: list[tuple[TopicIdPartition, PartitionData]]
    erroneous: list[tuple[TopicIdPartition, PartitionResult]]
    max_bytes: int
    min_bytes: int
    deadline_ms: int
    received_ms: int
    replica_id: int = -1  # >= 0: a follower fetch
    incomplete: set = dataclasses.field(default_factory=set)  # partitions whose first batch did not fit


@dataclass(slots=True)
class Reads:
    """What readFromLog returned: each read partition's result and records (an error: b""), in read order."""

    results: dict[TopicIdPartition, PartitionResult] = dataclasses.field(default_factory=dict)
    records: dict[TopicIdPartition, bytes] = dataclasses.field(default_factory=dict)
    total: int = 0
    any_error: bool = False


class FetchService:
    """The broker's fetch path: owns the session cache and the FetchManager."""

    def __init__(self, state: BrokerState, history: int = 10_000) -> None:
        self.state = state
        self.cache: FetchSessionCache
        self.manager: FetchManager
        self.history: collections.deque[FetchSeen] = collections.deque(maxlen=history)
        # One generator for the broker's lifetime: a reset (simulated restart) must not hand out the old ids again.
        source = state.config.session_id_source
        self.rng = source if source is not None else random.Random(state.config.session_seed)
        self.reset()

    def reset(self) -> None:
        """A fresh, empty session cache: what clients see after a broker restart."""
        c = self.state.config
        self.cache = FetchSessionCache(max_slots=c.cache_slots, shards=c.cache_shards, eviction_ms=c.eviction_ms,
                                       rng=self.rng)
        self.manager = FetchManager(self.cache)

    # -- 1-4: request to context, first read -------------------------------------------------------------
    def begin(self, request: Request, client: str, now_ms: int) -> tuple[typing.Any, PendingFetch | None]:
        """(response, None) when the answer is immediate, else (None, pending) for the server to wait on."""
        return run_steps(self.begin_steps(request, client, now_ms))

    def begin_steps(self, request: Request, client: str, now_ms: int
                    ) -> Steps[tuple[typing.Any, PendingFetch | None]]:
        """`begin`, yielding between slices of partitions."""
        body, version = request.body, request.api_version
        topic_names = self.state.topics.names_by_id() if version >= 13 else {}
        fetch_data = yield from _fetch_data(body, version, topic_names)
        to_forget = _to_forget(body, version, topic_names)
        metadata = FetchMetadata(int(getattr(body, "session_id", 0)), int(getattr(body, "session_epoch", -1)))
        context = self.manager.new_context(now_ms, version, metadata, _is_follower(body, version), fetch_data,
                                           to_forget, topic_names)
        if context.kind == "error":  # session errors (and out-of-range ids) are answered at once
            if context.error_code == UNKNOWN_SERVER_ERROR:   # newContext threw (an id beyond the shards)
                return self._unknown_server_error(request, client, context), None
            outcome = context.update_and_generate_response(now_ms, {})
            response = yield from self._respond(request, client, context, outcome, {})
            return response, None

        readable, erroneous = yield from self._classify(context.partitions(), version, _is_follower(body, version))
        max_bytes = min(int(getattr(body, "max_bytes", 0x7FFFFFFF)), self.state.config.fetch_max_bytes)
        min_bytes = min(int(body.min_bytes), max_bytes)
        max_wait = int(body.max_wait.total_seconds() * 1000)
        pending = PendingFetch(request, client, context, readable, erroneous, max_bytes, min_bytes,
                               now_ms + max_wait, now_ms, _replica_id(body, version))
        reads = yield from self._read(pending)
        # ReplicaManager.fetchMessages answers at once in these cases; otherwise DelayedFetch.
        if max_wait <= 0 or not readable or reads.total >= min_bytes or reads.any_error:
            response = yield from self._complete(pending, now_ms, reads)
            return response, None
        return None, pending

    # -- delayed fetch --------------------------------------------------------------------------------------
    def ready(self, pending: PendingFetch) -> bool:
        """DelayedFetch.tryComplete: enough bytes accumulated beyond each fetch offset, or a partition vanished."""
        accumulated = 0
        for tip, data in pending.readable:
            log = self.state.topics.partition(tip.topic, tip.partition)
            if log is None:
                return True
            accumulated += min(data.max_bytes, log.bytes_available(data.fetch_offset))
        return accumulated >= pending.min_bytes

    def complete(self, pending: PendingFetch, now_ms: int) -> typing.Any:
        """Re-read (as DelayedFetch.onComplete does) and build the response."""
        return run_steps(self.complete_steps(pending, now_ms))

    def complete_steps(self, pending: PendingFetch, now_ms: int) -> Steps[typing.Any]:
        reads = yield from self._read(pending)
        return (yield from self._complete(pending, now_ms, reads))

    # -- internals ------------------------------------------------------------------------------------------
    def _classify(self, partitions, version, follower: bool) -> Steps[tuple[list, list]]:
        """KafkaApis.handleFetchRequest's split into readable and erroneous partitions, in its order: a follower's
        in one pass; a consumer's unknown topic ids first, then (after the READ check on the rest) unknown
        topics and partitions."""
        readable: list = []
        unknown_ids: list = []
        unknown: list = []
        for i, (tip, data) in enumerate(partitions):
            if i % SLICE == SLICE - 1:
                yield
            if version >= 13 and tip.topic is None:
                unknown_ids.append((tip, _error_result(UNKNOWN_TOPIC_ID)))
            elif self.state.topics.partition(tip.topic, tip.partition) is None:
                (unknown_ids if follower else unknown).append((tip, _error_result(UNKNOWN_TOPIC_OR_PARTITION)))
            else:
                readable.append((tip, data))
        return readable, unknown_ids + unknown

    def _read(self, pending: PendingFetch) -> Steps[Reads]:
        """ReplicaManager.readFromLog: KIP-74 limits in context order."""
        hard_limit = pending.request.api_version <= 2
        min_one_message = not hard_limit
        limit = pending.max_bytes
        reads = Reads()
        results, records = reads.results, reads.records
        pending.incomplete.clear()   # a delayed fetch reads again when it completes
        for i, (tip, data) in enumerate(pending.readable):
            if i % SLICE == SLICE - 1:
                yield
            log = self.state.topics.partition(tip.topic, tip.partition)
            code = UNKNOWN_TOPIC_OR_PARTITION if log is None else _read_refused(data, pending.replica_id)
            if log is not None and not code:
                rr = log.read(data.fetch_offset, min(data.max_bytes, limit), min_one_message, hard_limit)
                code = rr.error_code
            if code:
                results[tip], records[tip] = _error_result(code), b""
                reads.any_error = True
                continue
            if rr.first_entry_incomplete:
                pending.incomplete.add(tip)
            size = len(rr.records)
            if size > 0:
                min_one_message = False
            limit = max(0, limit - size)
            reads.total += size
            results[tip] = PartitionResult(error_code=0, high_watermark=rr.high_watermark,
                                           last_stable_offset=rr.high_watermark,
                                           log_start_offset=rr.log_start_offset, records_size=size)
            records[tip] = rr.records
        return reads

    def _complete(self, pending: PendingFetch, now_ms: int, reads: Reads) -> Steps[typing.Any]:
        results = reads.results
        for i, (tip, result) in enumerate(pending.erroneous):  # KafkaApis appends them after the read ones
            if i % SLICE == SLICE - 1:
                yield
            results[tip] = result
        context, follower = pending.context, pending.replica_id >= 0
        # KafkaApis sizes a consumer's response before updating the context, a follower's after (Kafka 4.3.1 NPE,
        # see _unnamed_zero_id_not_last): a consumer's failure changes nothing more, a follower's session exists.
        if not follower and _unnamed_zero_id_not_last(context.response_size_partitions(results)):
            return self._unknown_server_error(pending.request, pending.client, context)
        if isinstance(context, FullFetchContext) and len(results) > SLICE:
            yield from context.prepare(results, SLICE)   # the new session's partitions, in slices
        outcome = context.update_and_generate_response(now_ms, results)
        if follower and _unnamed_zero_id_not_last([tip for tip, _ in outcome.partitions]):
            return self._unknown_server_error(pending.request, pending.client, context)
        return (yield from self._respond(pending.request, pending.client, context, outcome, reads.records,
                                         pending.incomplete))

    def _unknown_server_error(self, request: Request, client: str, context) -> typing.Any:
        """FetchRequest.getErrorResponse, KafkaApis' answer to an exception: UNKNOWN_SERVER_ERROR, the request's
        SessionId and, below v13, every partition as the request listed it (one topic entry per request topic,
        repeats kept; HW, LSO and log start -1); v13+ none. Seen so on Kafka 4.3.1."""
        body = request.body
        m = response_module(body)
        topics: tuple = ()
        if request.api_version < 13:
            topics = tuple(
                make(m.FetchableTopicResponse, topic=t.topic, partitions=tuple(
                    make(m.PartitionData, partition_index=int(p.partition), error_code=UNKNOWN_SERVER_ERROR,
                         high_watermark=-1, last_stable_offset=-1, log_start_offset=-1, aborted_transactions=(),
                         preferred_read_replica=-1, records=b"")
                    for p in t.partitions))
                for t in body.topics)
        session_id = int(getattr(body, "session_id", 0))
        self._record(request, client, context.kind, UNKNOWN_SERVER_ERROR, session_id,
                     sum(len(t.partitions) for t in topics), 0)
        return make(m.FetchResponse, throttle_time=datetime.timedelta(0), error_code=UNKNOWN_SERVER_ERROR,
                    session_id=session_id, responses=topics, node_endpoints=())

    def _respond(self, request: Request, client: str, context, outcome, records, incomplete=frozenset()
                 ) -> Steps[typing.Any]:
        body = request.body
        m = response_module(body)
        # FetchIsolation.of: READ_COMMITTED only for consumers; replicas (>= 0) and the future replica (-3) read
        # to the log end, and their reads carry no aborted-transaction list (seen on Kafka 4.3.1).
        replica_id = _replica_id(body, request.api_version)
        read_committed = int(getattr(body, "isolation_level", 0)) == 1 and replica_id < 0 and replica_id != -3
        leader = getattr(m, "LeaderIdAndEpoch", None) if request.api_version >= 16 else None
        topics: list[tuple[TopicIdPartition, list]] = []
        records_bytes = 0
        for i, (tip, result) in enumerate(outcome.partitions):
            if i % SLICE == SLICE - 1:
                yield
            data = records.get(tip, b"")
            records_bytes += len(data)
            part = make(m.PartitionData, partition_index=tip.partition, error_code=result.error_code,
                        high_watermark=result.high_watermark, last_stable_offset=result.last_stable_offset,
                        log_start_offset=result.log_start_offset,
                        aborted_transactions=_aborted_transactions(tip in records, result,
                                                                   read_committed and tip not in incomplete),
                        preferred_read_replica=result.preferred_read_replica, records=data)
            if leader is not None and result.error_code in (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH):
                # KafkaApis (v16+): the partition's current leader rides along with these two errors.
                part = dataclasses.replace(part, current_leader=leader(leader_id=self.state.node_id,
                                                                       leader_epoch=LEADER_EPOCH))
            # FetchResponse.toMessage: consecutive partitions of the same topic share one topic entry.
            if topics and topics[-1][0].topic == tip.topic and topics[-1][0].topic_id == tip.topic_id:
                topics[-1][1].append(part)
            else:
                topics.append((tip, [part]))
        responses = tuple(
            make(m.FetchableTopicResponse, topic=tip.topic, topic_id=tip.topic_id, partitions=tuple(parts))
            for tip, parts in topics
        )
        self._record(request, client, context.kind, outcome.error_code, outcome.session_id,
                     len(outcome.partitions), records_bytes)
        return make(m.FetchResponse, throttle_time=datetime.timedelta(milliseconds=outcome.throttle_time_ms),
                    error_code=outcome.error_code, session_id=outcome.session_id, responses=responses,
                    node_endpoints=())

    def _record(self, request, client, kind, error_code, response_session_id, n_parts, records_bytes) -> None:
        body = request.body
        session_id = int(getattr(body, "session_id", 0))
        epoch = int(getattr(body, "session_epoch", -1))
        request_parts = sum(len(t.partitions) for t in body.topics)
        self.history.append(FetchSeen(client, request.client_id, request.api_version, session_id, epoch, kind,
                                      error_code, response_session_id, request_parts, n_parts, records_bytes))
        if error_code:
            self.state.log.info("fetch session error %d %s: client=%s client_id=%s session=%d epoch=%d v%d",
                                error_code, error_name(error_code), client, request.client_id, session_id, epoch,
                                request.api_version)
        self.log_cache_events()

    def log_cache_events(self) -> None:
        """One log line per session created, evicted or removed since the last call."""
        for event in self.cache.drain_events():
            self.state.log.info("%s", _describe_event(event))


def _describe_event(event) -> str:
    name = type(event).__name__
    fields = " ".join(f"{k}={v}" for k, v in _event_fields(event).items())
    return f"fetch session {name.removeprefix('Session').lower()}: {fields}"


def _event_fields(event) -> dict:
    if dataclasses.is_dataclass(event):
        return {f.name: getattr(event, f.name) for f in dataclasses.fields(event)}
    return dict(vars(event))


def _error_result(code: int) -> PartitionResult:
    # FetchResponse.partitionResponse(tp, error): unknown HW, LSO and log start offset.
    return PartitionResult(error_code=code, high_watermark=-1, last_stable_offset=-1, log_start_offset=-1)


def _unnamed_zero_id_not_last(partitions: list[TopicIdPartition]) -> bool:
    """Whether Kafka 4.3.1 fails to build this response: FetchResponse.toMessage groups consecutive partitions by
    topic, comparing by name when the previous topic's id is the zero id, and the name of a v13+ partition sent with
    the all-zero topic id is null, so any partition after it throws a NullPointerException (FetchResponse
    .matchingTopic) and KafkaApis answers UNKNOWN_SERVER_ERROR instead. Seen on Kafka 4.3.1."""
    return any(tip.topic is None and not tip.topic_id.int for tip in partitions[:-1])


def _read_refused(data: PartitionData, replica_id: int) -> int:
    """Partition.localLogWithEpochOrThrow and followerReplicaOrThrow: the error a read fails with, or 0.

    A consumer naming a leader epoch other than the current one is fenced (older) or told to wait (newer). A
    follower fetch is refused on every partition: this broker is the only replica of everything, and its own id is
    no follower either (getReplica knows only remote replicas); with a leader epoch Kafka says UNKNOWN_LEADER_EPOCH
    (the replica may be being added), without one NOT_LEADER_OR_FOLLOWER, with HW -1 (seen on Kafka 4.3.1)."""
    epoch = data.current_leader_epoch
    if epoch >= 0 and epoch != LEADER_EPOCH:
        return FENCED_LEADER_EPOCH if epoch < LEADER_EPOCH else UNKNOWN_LEADER_EPOCH
    if replica_id >= 0:
        return UNKNOWN_LEADER_EPOCH if epoch >= 0 else NOT_LEADER_OR_FOLLOWER
    return 0


def _aborted_transactions(was_read: bool, result: PartitionResult, listed: bool):
    """Kafka's AbortedTransactions: a partition refused before the read (unknown topic, id or partition) gets
    FetchResponse.partitionResponse's empty array; a failed read null; a good read an array only when read
    committed and its first batch fitted (``listed``; readFromLog replaces a cut first batch by an empty read that
    has no list). Seen so on Kafka 4.3.1."""
    if not was_read:
        return ()
    if result.error_code:
        return None
    return () if listed else None


def _replica_id(body, version: int) -> int:
    if version >= 15:
        return int(body.replica_state.replica_id)
    return int(getattr(body, "replica_id", -1))


def _is_follower(body, version: int) -> bool:
    return _replica_id(body, version) >= 0


def _fetch_data(body, version: int, topic_names) -> Steps[dict[TopicIdPartition, PartitionData]]:
    """FetchRequest.fetchData: request order; v13+ names from the broker's id map (None when unknown)."""
    out: dict[TopicIdPartition, PartitionData] = {}
    done = 0
    for topic in body.topics:
        if version >= 13:
            topic_id = topic.topic_id or ZERO_UUID   # kio reads the all-zero id as None
            name = topic_names.get(topic_id)
        else:
            topic_id, name = ZERO_UUID, topic.topic
        for p in topic.partitions:
            done += 1
            if done % SLICE == 0:
                yield
            out[TopicIdPartition(topic_id, name, int(p.partition))] = PartitionData(
                fetch_offset=int(p.fetch_offset),
                log_start_offset=int(getattr(p, "log_start_offset", -1)),
                max_bytes=int(p.partition_max_bytes),
                current_leader_epoch=int(getattr(p, "current_leader_epoch", -1)),
                last_fetched_epoch=int(getattr(p, "last_fetched_epoch", -1)),
                topic_id=topic_id,
            )
    return out


def _to_forget(body, version: int, topic_names) -> list[TopicIdPartition]:
    out: list[TopicIdPartition] = []
    for topic in getattr(body, "forgotten_topics_data", ()) or ():
        if version >= 13:
            topic_id = topic.topic_id or ZERO_UUID
            name = topic_names.get(topic_id)
        else:
            topic_id, name = ZERO_UUID, topic.topic
        out.extend(TopicIdPartition(topic_id, name, int(p)) for p in topic.partitions)
    return out
