"""FetchManager.newContext and the four fetch contexts (Kafka's FetchManager.java / FetchContext.java).

A context is created at request time (session lookup, epoch check, session update, touch and epoch advance all
happen then) and answers once the broker has read the partitions it lists. Responses are FetchOutcome values:
exactly the partitions the wire response carries, in order.
"""

from __future__ import annotations

import uuid
from typing import Iterable, Iterator, Mapping, NamedTuple

from . import errors
from .cache import FetchSessionCache
from .metadata import FINAL_EPOCH, INVALID_SESSION_ID, MAX_INT, FetchMetadata
from .partitions import PartitionData, PartitionResult, ReadResults, TopicIdPartition
from .session import CachedPartition, FetchSession

TOPIC_IDS_MIN_VERSION = 13   # Fetch v13 replaced topic names by topic ids


class FetchOutcome(NamedTuple):
    """A generated Fetch response: top-level error, SessionId, ThrottleTimeMs and its partitions in order.

    A NamedTuple (immutable, equal field by field) so that the hot contexts make one in C, with
    ``_tuple_new(FetchOutcome, (...))``: a simulation makes one per exchange."""

    error_code: int
    session_id: int
    throttle_time_ms: int
    partitions: tuple[tuple[TopicIdPartition, PartitionResult], ...]


_EMPTY: tuple = ()
_tuple_new = tuple.__new__




class FetchContext:
    """Base of the four contexts. ``kind`` is "sessionless", "full", "incremental" or "error"."""

    __slots__ = ()

    kind: str = ""
    error_code: int = errors.NONE

    def partitions(self) -> list[tuple[TopicIdPartition, PartitionData]]:
        """What the broker must read, in order (foreachPartition)."""
        return []

    def get_fetch_offset(self, tp: TopicIdPartition) -> int | None:
        return None

    def update_and_generate_response(self, now_ms: int, results: Mapping[TopicIdPartition, PartitionResult]
                                     ) -> FetchOutcome:
        raise NotImplementedError

    def throttled_response(self, throttle_ms: int) -> FetchOutcome:
        """KIP-219: an empty response with SessionId 0; a full context creates no session and the round-robin
        counter does not move."""
        return FetchOutcome(errors.NONE, INVALID_SESSION_ID, throttle_ms, _EMPTY)

    def response_size_partitions(self, results: Mapping[TopicIdPartition, PartitionResult]
                                 ) -> list[TopicIdPartition]:
        """getResponseSize's selection: the partitions a response would carry, without changing any state."""
        return list(results)


class SessionErrorContext(FetchContext):
    """A session error (70, 71, 106): nothing is read, the response is (error, SessionId 0, no partitions)."""

    __slots__ = ("error_code",)

    kind = "error"

    def __init__(self, error_code: int) -> None:
        self.error_code = error_code

    def update_and_generate_response(self, now_ms, results) -> FetchOutcome:
        return _tuple_new(FetchOutcome, (self.error_code, INVALID_SESSION_ID, 0, _EMPTY))

    def response_size_partitions(self, results) -> list[TopicIdPartition]:
        return []

    def __repr__(self) -> str:
        return f"SessionErrorContext({errors.error_name(self.error_code)})"


class OutOfRangeSessionContext(FetchContext):
    """A SessionId outside the shard list (>= shards*range, or <= -range).

    Kafka's getCacheShard throws IndexOutOfBoundsException inside newContext, and KafkaApis answers with
    FetchRequest.getErrorResponse: UNKNOWN_SERVER_ERROR at top level, the request's SessionId echoed, and for v<13
    every requested partition with the same error (HW/LSO/log start -1). Seen so on Kafka 4.3.1
    (tests/kafka/test_differential_engine.py). The pre-3.8 single cache has no such error (cache.py).
    """

    __slots__ = ("version", "req_metadata", "fetch_data")

    kind = "error"
    error_code = errors.UNKNOWN_SERVER_ERROR

    def __init__(self, version: int, req_metadata: FetchMetadata, fetch_data: Mapping[TopicIdPartition, PartitionData]
                 ) -> None:
        self.version = version
        self.req_metadata = req_metadata
        self.fetch_data = fetch_data

    def _outcome(self, throttle_ms: int) -> FetchOutcome:
        parts: tuple = _EMPTY
        if self.version < TOPIC_IDS_MIN_VERSION:
            err = PartitionResult(error_code=errors.UNKNOWN_SERVER_ERROR)
            parts = tuple((tp, err) for tp in self.fetch_data)
        return FetchOutcome(errors.UNKNOWN_SERVER_ERROR, self.req_metadata.session_id, throttle_ms, parts)

    def update_and_generate_response(self, now_ms, results) -> FetchOutcome:
        return self._outcome(0)

    def throttled_response(self, throttle_ms: int) -> FetchOutcome:
        return self._outcome(throttle_ms)

    def response_size_partitions(self, results) -> list[TopicIdPartition]:
        return [tp for tp, _ in self._outcome(0).partitions]


class _RequestedPartitionsContext(FetchContext):
    """A context that reads exactly the partitions the request listed (Kafka's sessionless and full contexts)."""

    __slots__ = ()

    fetch_data: Mapping[TopicIdPartition, PartitionData]

    def partitions(self) -> list[tuple[TopicIdPartition, PartitionData]]:
        return list(self.fetch_data.items())

    def get_fetch_offset(self, tp: TopicIdPartition) -> int | None:
        data = self.fetch_data.get(tp)
        return None if data is None else data.fetch_offset


class SessionlessFetchContext(_RequestedPartitionsContext):
    """A full request that creates no session (epoch -1, or a session emptied by forgets): SessionId 0."""

    __slots__ = ("fetch_data",)

    kind = "sessionless"

    def __init__(self, fetch_data: Mapping[TopicIdPartition, PartitionData]) -> None:
        self.fetch_data = fetch_data

    def update_and_generate_response(self, now_ms, results) -> FetchOutcome:
        return _tuple_new(FetchOutcome, (errors.NONE, INVALID_SESSION_ID, 0, tuple(results.items())))


class FullFetchContext(_RequestedPartitionsContext):
    """A full request (epoch 0): every partition is returned and a session is created from the RESPONSE."""

    __slots__ = ("cache", "fetch_data", "uses_topic_ids", "is_from_follower", "session_id", "_prepared")

    kind = "full"

    def __init__(self, cache: FetchSessionCache, fetch_data: Mapping[TopicIdPartition, PartitionData],
                 uses_topic_ids: bool, is_from_follower: bool) -> None:
        self.cache = cache
        self.fetch_data = fetch_data
        self.uses_topic_ids = uses_topic_ids
        self.is_from_follower = is_from_follower
        self.session_id = INVALID_SESSION_ID   # filled in by update_and_generate_response
        self._prepared: tuple[Mapping, int, dict[TopicIdPartition, CachedPartition]] | None = None

    def prepare(self, results: Mapping[TopicIdPartition, PartitionResult], slice_size: int) -> Iterator[None]:
        """Build the would-be session's partitions before update_and_generate_response, yielding after every
        ``slice_size``: a broker answering other requests meanwhile sees nothing (no cache state is read or
        changed here), and the session is still created, or refused, in one step at update time. For a full
        fetch of 100,000s of partitions, where building them at once would hold everyone else up."""
        cached: dict[TopicIdPartition, CachedPartition] = {}
        for i, (tp, resp) in enumerate(results.items()):
            if i % slice_size == slice_size - 1:
                yield
            cached[tp] = self._cached_partition(tp, resp)
        self._prepared = (results, len(results), cached)

    def _cached_partition(self, tp: TopicIdPartition, resp: PartitionResult) -> CachedPartition:
        req = self.fetch_data.get(tp)
        if req is None:   # Kafka would NPE here: a response partition the request did not ask for
            raise ValueError(f"response partition {tp} is not in the full request")
        return CachedPartition(tp, req, resp)

    def update_and_generate_response(self, now_ms, results) -> FetchOutcome:
        # The round-robin counter advances here, whether or not a session is created.
        shard = self.cache.get_next_cache_shard()

        def create_partitions() -> dict[TopicIdPartition, CachedPartition]:
            # Cached partitions come from the response map (readable partitions, then erroneous ones), with
            # the response's HW and log start offset, so the first incremental response only carries changes.
            prepared = self._prepared
            if prepared is not None and prepared[0] is results and prepared[1] == len(results):
                return prepared[2]
            return {tp: self._cached_partition(tp, resp) for tp, resp in results.items()}

        self.session_id = shard.maybe_create_session(now_ms, self.is_from_follower, len(results),
                                                     self.uses_topic_ids, create_partitions)
        return _tuple_new(FetchOutcome, (errors.NONE, self.session_id, 0, tuple(results.items())))


class IncrementalFetchContext(FetchContext):
    """An incremental request on a live session: only changed partitions are returned (spec §2.5)."""

    __slots__ = ("session", "topic_names", "session_id", "_expected_epoch")

    kind = "incremental"

    def __init__(self, session: FetchSession, topic_names: Mapping[uuid.UUID, str]) -> None:
        self.session = session
        self.topic_names = topic_names
        self.session_id = session.id
        # newContext has just advanced the session to the request's next epoch: if it moved on by the time the
        # response is built, another request on this session was processed in between.
        self._expected_epoch = session.epoch

    def get_fetch_offset(self, tp: TopicIdPartition) -> int | None:
        return self.session.get_fetch_offset(tp)

    def partitions(self) -> list[tuple[TopicIdPartition, PartitionData]]:
        session = self.session
        values = session.partition_map.values()
        if session.uses_topic_ids:
            names = self.topic_names
            for cp in values:
                if cp.topic is None:
                    cp.maybe_resolve_unknown_name(names)
        return [(cp.tip, cp.req) for cp in values]

    def update_and_generate_response(self, now_ms, results, walk_all: bool = False) -> FetchOutcome:
        """The response, from the broker's reads of the session's partitions.

        Kafka's PartitionIterator walks every partition of the session on every incremental fetch. When
        ``results`` is a ReadResults derived from the one this session last answered from, only its changed
        partitions, those added to the session since and those the last response must repeat are visited, in
        ``results`` order; every other one is settled (same result object, nothing to send, nothing to update),
        so the response and the session are the same as the walk's. ``walk_all`` forces the walk (the reference
        the fast path is tested against).
        """
        session = self.session
        if session.epoch != self._expected_epoch:
            # Another request on this session was processed in between ("Possible duplicate request").
            return FetchOutcome(errors.INVALID_FETCH_SESSION_EPOCH, session.id, 0, _EMPTY)
        pmap = session.partition_map
        get = pmap.get
        selected: list[tuple[TopicIdPartition, PartitionResult]] = []
        append = selected.append
        moved: list[tuple[TopicIdPartition, CachedPartition]] = []
        revisit: list[TopicIdPartition] = []
        since = getattr(results, "since", None)
        items: Iterable[tuple[TopicIdPartition, PartitionResult]]
        if since is not None and since is session.answered and not walk_all:
            items = _changed_items(session, results)
        else:
            items = results.items()
        for tp, resp in items:
            cp = get(tp)
            if cp is None:          # the Java port's null guard
                continue
            # A result object identical to the last one applied to a partition that was not selected then cannot
            # be selected now (results are immutable).
            if resp is cp.last_resp and not cp.last_must:
                continue
            # Inlined CachedPartition.maybe_update_response_data(resp, update=True).
            records = resp.records_size
            must = records > 0
            hw = resp.high_watermark
            if cp.high_watermark != hw:
                cp.high_watermark = hw
                must = True
            lso = resp.log_start_offset
            if cp.local_log_start_offset != lso:
                cp.local_log_start_offset = lso
                must = True
            if resp.error_code:
                cp.high_watermark = -1     # re-send once the error clears
                must = True
                revisit.append(tp)
            elif resp.preferred_read_replica != -1 or resp.diverging_epoch >= 0:
                must = True
                revisit.append(tp)
            elif records > 0:
                revisit.append(tp)
            cp.last_resp = resp
            cp.last_must = must
            if must:
                append((tp, resp))
                if records > 0:
                    moved.append((tp, cp))
        # KAFKA-12330: only partitions that returned records go to the back of the session, in response order.
        for tp, cp in moved:
            del pmap[tp]
            pmap[cp.tip] = cp
        # Only an immutable ReadResults can be what a later one says it changed from.
        session.answered = results if isinstance(results, ReadResults) else None
        session.revisit = revisit
        if session.added:
            session.added = []
        return _tuple_new(FetchOutcome, (errors.NONE, session.id, 0, tuple(selected)))

    def throttled_response(self, throttle_ms: int) -> FetchOutcome:
        session = self.session
        if session.epoch != self._expected_epoch:
            return FetchOutcome(errors.INVALID_FETCH_SESSION_EPOCH, session.id, throttle_ms, _EMPTY)
        return FetchOutcome(errors.NONE, session.id, throttle_ms, _EMPTY)

    def response_size_partitions(self, results) -> list[TopicIdPartition]:
        session = self.session
        if session.epoch != self._expected_epoch:
            return []
        get = session.partition_map.get
        out = []
        for tp, resp in results.items():
            cp = get(tp)
            if cp is not None and cp.maybe_update_response_data(resp, False):
                out.append(tp)
        return out


def _changed_items(session: FetchSession, results: ReadResults) -> Iterable[tuple[TopicIdPartition, PartitionResult]]:
    """The (partition, result) pairs of ``results`` an incremental response must look at, in ``results`` order,
    given that the session last answered from ``results.since``: the changed ones, when every partition the session
    must look at again (FetchSession.revisit, .added) is among them; otherwise all of them (rare: a partition that
    repeats a result with records, an error, ..., or was re-added with an unchanged result)."""
    extra = session.revisit
    if session.added:
        extra = extra + session.added
    if extra:
        get, before = results.get, results.since.get   # type: ignore[union-attr]
        for tp in extra:
            if get(tp, before) is before(tp):       # unchanged (or absent: the sentinel never matches)
                return results.items()
    flat = iter(results.changed)
    return zip(flat, flat)


class FetchManager:
    """Turns each Fetch request into a context (FetchManager.newContext, spec §2.2)."""

    def __init__(self, cache: FetchSessionCache) -> None:
        self.cache = cache

    def new_context(self, now_ms: int, version: int, metadata: FetchMetadata, is_follower: bool,
                    fetch_data: Mapping[TopicIdPartition, PartitionData],
                    to_forget: Iterable[TopicIdPartition],
                    topic_names: Mapping[uuid.UUID, str]) -> FetchContext:
        cache = self.cache
        session_id = metadata.session_id
        epoch = metadata.epoch
        if epoch == 0 or epoch == FINAL_EPOCH:                       # full
            if session_id != INVALID_SESSION_ID:
                # Any session named in a full request is closed, with no ownership check.
                try:
                    shard = cache.get_cache_shard(session_id)
                except errors.SessionIdOutOfRange:
                    return OutOfRangeSessionContext(version, metadata, fetch_data)
                shard.remove(session_id, now_ms, "closed")
            if epoch == FINAL_EPOCH:
                return SessionlessFetchContext(fetch_data)
            return FullFetchContext(cache, fetch_data, version >= TOPIC_IDS_MIN_VERSION, is_follower)
        # incremental: epoch > 0, or <= -2
        if session_id >= 0:   # get_cache_shard inlined for the common case (Java int division of a positive id)
            index = session_id // cache.session_id_range
            shards = cache.shards
            if index >= len(shards):
                if len(shards) > 1:
                    return OutOfRangeSessionContext(version, metadata, fetch_data)
                index = 0      # the pre-3.8 single cache has no shard index: INT_MAX just misses
            shard = shards[index]
        else:
            try:
                shard = cache.get_cache_shard(session_id)
            except errors.SessionIdOutOfRange:
                return OutOfRangeSessionContext(version, metadata, fetch_data)
        session = shard._sessions.get(session_id)
        if session is None:
            return SessionErrorContext(errors.FETCH_SESSION_ID_NOT_FOUND)
        # Check order: epoch first, then topic-id usage; an error leaves the session untouched.
        if session.epoch != epoch:
            return SessionErrorContext(errors.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != (version >= TOPIC_IDS_MIN_VERSION):
            return SessionErrorContext(errors.FETCH_SESSION_TOPIC_ID_ERROR)
        if fetch_data or to_forget:   # an incremental request that sends and forgets nothing changes no partition
            session.update(fetch_data, to_forget)
        if not session.partition_map:
            shard.remove(session, now_ms, "empty")
            return SessionlessFetchContext(fetch_data)
        shard.touch(session, now_ms)                                  # lastUsed = request time
        session.epoch = FINAL_EPOCH if epoch < 0 else 1 if epoch == MAX_INT else epoch + 1   # next_epoch, before
        return IncrementalFetchContext(session, topic_names)                # the response is built
