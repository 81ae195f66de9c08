"""FetchSession and CachedPartition: one broker-side session and the partitions it caches.

Port of FetchSession / FetchSession.CachedPartition (server/src/main/java/org/apache/kafka/server/FetchSession.java,
core/src/main/scala/kafka/server/FetchSession.scala). Mutable on purpose: the cache and the contexts update
sessions in place, as Kafka does under the session lock.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from .partitions import PartitionData, PartitionResult, TopicIdPartition


class CachedPartition:
    """One partition of a session: the last request parameters plus the HW / log start offset last sent.

    ``fetcher_log_start_offset`` (in ``req``) is the follower's log start offset from the request;
    ``local_log_start_offset`` is this broker's, as last returned in a response.
    """

    __slots__ = ("tip", "topic", "topic_id", "partition", "req", "high_watermark", "local_log_start_offset",
                 "last_resp", "last_must")

    def __init__(self, tip: TopicIdPartition, req: PartitionData | None = None,
                 resp: PartitionResult | None = None) -> None:
        self.tip = tip                      # the identity as last resolved (topic may be None until known)
        self.topic = tip.topic
        self.topic_id = tip.topic_id
        self.partition = tip.partition
        if req is None:
            req = PartitionData(-1, -1, -1, -1, -1, tip.topic_id)
        elif req.topic_id.int != tip.topic_id.int:
            # reqData() reports the cached topic id, whatever the request's PartitionData carried.
            req = PartitionData(req.fetch_offset, req.log_start_offset, req.max_bytes,
                                req.current_leader_epoch, req.last_fetched_epoch, tip.topic_id)
        self.req = req
        # New partitions start at -1 so the first response after adding them always includes them.
        self.high_watermark = -1 if resp is None else resp.high_watermark
        self.local_log_start_offset = -1 if resp is None else resp.log_start_offset
        # The last PartitionResult applied with update=True and its verdict. Results are immutable, so the same
        # object again means nothing changed: HW and log start offset already equal it (manager's fast path).
        self.last_resp: PartitionResult | None = None
        self.last_must = True

    # The request parameters, named as in Kafka.
    @property
    def fetch_offset(self) -> int:
        return self.req.fetch_offset

    @property
    def max_bytes(self) -> int:
        return self.req.max_bytes

    @property
    def fetcher_log_start_offset(self) -> int:
        return self.req.log_start_offset

    def update_request_params(self, req: PartitionData) -> None:
        """maxBytes, fetchOffset, fetcherLogStartOffset, currentLeaderEpoch and lastFetchedEpoch are overwritten."""
        if req.topic_id.int != self.topic_id.int:
            req = PartitionData(req.fetch_offset, req.log_start_offset, req.max_bytes,
                                req.current_leader_epoch, req.last_fetched_epoch, self.topic_id)
        self.req = req

    def maybe_resolve_unknown_name(self, topic_names: Mapping) -> None:
        """Fill in the name once the broker learns it; a resolved name is never un-resolved."""
        if self.topic is None:
            name = topic_names.get(self.topic_id)
            if name is not None:
                self.topic = name
                self.tip = TopicIdPartition(self.topic_id, name, self.partition)

    def maybe_update_response_data(self, resp: PartitionResult, update: bool) -> bool:
        """Whether an incremental response must include this partition (spec §2.5); optionally update the cache.

        LastStableOffset, aborted transactions, current leader and snapshot id are deliberately not tracked.
        """
        must = resp.records_size > 0
        if self.high_watermark != resp.high_watermark:
            must = True
            if update:
                self.high_watermark = resp.high_watermark
        if self.local_log_start_offset != resp.log_start_offset:
            must = True
            if update:
                self.local_log_start_offset = resp.log_start_offset
        if resp.preferred_read_replica != -1:
            must = True
        if resp.error_code != 0:
            # Cached HW set to -1 so the partition is re-sent once the error clears.
            if update:
                self.high_watermark = -1
            must = True
        if resp.diverging_epoch >= 0:
            must = True
        return must

    # Kafka's CachedPartition equality: by (topic id, partition) when the id is non-zero, else by name.
    def __eq__(self, other: object) -> bool:
        if isinstance(other, CachedPartition):
            return self.tip == other.tip
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.tip)

    def __repr__(self) -> str:
        return (f"CachedPartition(topic={self.topic}, topicId={self.topic_id}, partition={self.partition}, "
                f"maxBytes={self.max_bytes}, fetchOffset={self.fetch_offset}, highWatermark={self.high_watermark}, "
                f"fetcherLogStartOffset={self.fetcher_log_start_offset}, "
                f"localLogStartOffset={self.local_log_start_offset})")


class FetchSession:
    """A broker-side incremental fetch session.

    ``epoch`` is the epoch the broker expects NEXT. ``last_used_ms`` is only changed by the cache's ``touch``.
    ``cached_size`` is the partition count as of the last touch (-1 before the first); the cache's eviction
    keys and partition gauge use it, so a change to the map counts only after the next touch.
    """

    __slots__ = ("id", "privileged", "partition_map", "uses_topic_ids", "creation_ms", "last_used_ms", "epoch",
                 "cached_size", "_in_all", "_in_priv", "_lu_pushed", "_size_pushed", "answered", "revisit", "added")

    def __init__(self, session_id: int, privileged: bool, partition_map: dict[TopicIdPartition, CachedPartition],
                 uses_topic_ids: bool, creation_ms: int, last_used_ms: int, epoch: int) -> None:
        self.id = session_id
        self.privileged = privileged
        self.partition_map = partition_map  # ordered: the order the broker reads partitions in
        self.uses_topic_ids = uses_topic_ids
        self.creation_ms = creation_ms
        self.last_used_ms = last_used_ms
        self.epoch = epoch
        self.cached_size = -1
        # Cache bookkeeping (see cache.FetchSessionCacheShard.touch).
        self._in_all = False
        self._in_priv = False
        self._lu_pushed: int | None = None
        self._size_pushed = -1
        # What lets an incremental response visit only the partitions that changed (manager.IncrementalFetchContext):
        # the ReadResults the last incremental response was generated from (None: none, or a plain mapping), the
        # partitions that response must carry again given the same results (``revisit``), and the partitions added
        # to the session since (``added``). Every other partition it answered from is settled: given the same
        # result object it is left out and nothing about it changes.
        self.answered: Mapping | None = None
        self.revisit: list[TopicIdPartition] = []
        self.added: list[TopicIdPartition] = []

    @property
    def size(self) -> int:
        return len(self.partition_map)

    def get_fetch_offset(self, tp: TopicIdPartition) -> int | None:
        cp = self.partition_map.get(tp)
        return None if cp is None else cp.fetch_offset

    def partitions(self) -> list[TopicIdPartition]:
        return [cp.tip for cp in self.partition_map.values()]

    def update(self, fetch_data: Mapping[TopicIdPartition, PartitionData], to_forget: Iterable[TopicIdPartition]
               ) -> None:
        """Apply an incremental request: add or update every sent partition, then drop every forgotten one.
        (Kafka also returns the added/updated/removed lists, for a debug log line nobody here reads.)"""
        pmap = self.partition_map
        added = self.added if self.answered is not None else None
        for tp, req in fetch_data.items():
            cp = pmap.get(tp)
            if cp is None:
                pmap[tp] = CachedPartition(tp, req)
                if added is not None:
                    added.append(tp)
            else:
                cp.update_request_params(req)
        for tp in to_forget:
            pmap.pop(tp, None)

    def __repr__(self) -> str:
        return (f"FetchSession(id={self.id}, privileged={self.privileged}, partitionMap.size={self.size}, "
                f"usesTopicIds={self.uses_topic_ids}, creationMs={self.creation_ms}, "
                f"lastUsedMs={self.last_used_ms}, epoch={self.epoch})")
