"""Getting a real broker (--broker) ready for a replay: versions, topics, records, leaders.

A capture's fetches only replay as captured if the target can answer them: it must speak the captured Fetch
versions, have the capture's topics (their ids are the target's own, mapped by name), hold records at the rebased
offsets the clients ask for, and have a leader for every partition. Against Apache Kafka a fresh topic has none
of that at first: Metadata may not list it for a moment after CreateTopics answered, then its partitions answer
NOT_LEADER_OR_FOLLOWER for ~0.1-0.2 s, and it holds no records (every fetch past offset 0 is
OFFSET_OUT_OF_RANGE). On a cluster, replay sends every fetch to the one broker given, so the topics it creates
are placed on that broker's node alone.

The decisions are sans-IO (`fetch_version`, `records_to_write`, `short_topics`, `ClusterView`, `not_ready`);
`prepare` and `close_sessions` are the I/O edge, one admin connection each (ApiVersions, Metadata, CreateTopics,
Produce, sessionless probing Fetches; at the end, (id, -1) closes).
"""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from fetchtool.broker.wire import decode_response, encode_request
from fetchtool.protocol.codec import FetchResponseBody
from fetchtool.replay.net import ReplayError, connect, read_frame, reason
from fetchtool.replay.wire import TopicMapping, fetch_request, fetch_response
from fetchtool.sessions.metadata import FetchMetadata
from fetchtool.sessions.partitions import PartitionData, TopicIdPartition

FETCH = 1
PRODUCE = 0
CLIENT_ID = "fetchtool-replay"
# Partition errors that only mean "not ready yet" on a topic just created: UNKNOWN_TOPIC_OR_PARTITION,
# LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_ID.
NOT_READY = frozenset({3, 5, 6, 100})
TOPIC_ALREADY_EXISTS = 36
BATCH_RECORDS = 500  # records per produced batch
VALUE = b"x" * 16  # the records' value: replay measures sessions, not payloads
CLOSE_BATCH = 100  # session closes sent before reading their answers (a Kafka client has 5 in flight at most;
# these are the replay's own admin requests, answered in order)


@dataclass(slots=True)
class Target:
    """What a replay learnt about its target broker while preparing it."""

    fetch_versions: tuple[int, int] | None = None  # (min, max) Fetch versions; None: ApiVersions lists no Fetch
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    partitions: dict[str, int] = field(default_factory=dict)  # partitions of each topic on the target
    node_id: int | None = None  # the target's node id in its cluster's Metadata (None: not found)
    led_elsewhere: list[tuple[str, int]] = field(default_factory=list)  # (topic, partition) led by another node
    created: list[str] = field(default_factory=list)
    written: int = 0  # records produced into the created topics
    ready_after_probes: int = 0  # sessionless Fetch probes until every partition had a leader
    notes: list[str] = field(default_factory=list)


def fetch_version(captured: int, supported: tuple[int, int] | None) -> int:
    """The Fetch version to send for a captured one: the same where the target speaks it, else the nearest it
    does (Kafka 4 answers Fetch 4-18, so a v0-v3 capture goes out as v4 and a newer client's as v18)."""
    if supported is None:
        return captured
    low, high = supported
    return min(max(captured, low), high)


def records_to_write(low: dict[tuple[str, int], int], high: dict[tuple[str, int], int], topics: Iterable[str],
                     limit: int) -> dict[tuple[str, int], int]:
    """Records each partition of `topics` needs so every rebased captured offset exists (the lowest captured
    fetch offset becomes 0 on the target), at most `limit` a partition."""
    wanted = set(topics)
    out = {}
    for key, top in high.items():
        if key[0] in wanted:
            n = min(max(0, top - low.get(key, 0)), limit)
            if n:
                out[key] = n
    return out


def short_topics(needed: dict[str, int], present: dict[str, int]) -> dict[str, tuple[int, int]]:
    """Existing topics with fewer partitions than the capture fetches: name -> (on the target, needed)."""
    return {name: (present[name], n) for name, n in sorted(needed.items()) if name in present and present[name] < n}


@dataclass(frozen=True, slots=True)
class ClusterView:
    """What Metadata says: the cluster's brokers, each topic's id and each partition's leader."""

    brokers: dict[int, tuple[str, int]]  # node id -> (host, port)
    topic_ids: dict[str, uuid.UUID]
    leaders: dict[str, list[int]]  # topic -> leader node id by partition index (-1: none yet)

    def node_of(self, host: str, port: int) -> int | None:
        """The node id of the broker at host:port (the only broker when the cluster has one)."""
        found = [n for n, address in self.brokers.items() if address == (host, port)]
        if not found and len(self.brokers) == 1:
            found = list(self.brokers)
        return found[0] if len(found) == 1 else None

    def led_elsewhere(self, node: int | None, topics: dict[str, int]) -> list[tuple[str, int]]:
        """Partitions of `topics` whose leader is another node: replay sends every fetch to one broker."""
        if node is None:
            return []
        return [(t, p) for t in sorted(topics) for p, leader in enumerate(self.leaders.get(t, ())[:topics[t]])
                if leader >= 0 and leader != node]


def not_ready(body: FetchResponseBody, asked: Iterable[tuple[str, int]] = ()) -> list[tuple[str | None, int, int]]:
    """(topic, partition, error) of every partition a probing Fetch found without a leader (or not yet known).
    A partition `asked` for that an erroneous response leaves out is not ready either (its code: Kafka answers a
    topic id it does not know yet with a top-level error and no partitions); one left out of an answer without
    error is taken as ready, since brokers such as tansu only answer partitions that have data."""
    waiting = [(p.topic, p.partition, p.error_code) for p in body.partitions if p.error_code in NOT_READY]
    if not body.error_code:
        return waiting
    answered = {(p.topic, p.partition) for p in body.partitions}
    return waiting + [(t, p, body.error_code) for t, p in asked if (t, p) not in answered]


class _Admin:
    """One connection for the preparation's requests, answered one at a time."""

    reader: asyncio.StreamReader  # opened by __aenter__
    writer: asyncio.StreamWriter

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self.corr = 0

    async def __aenter__(self) -> _Admin:
        self.reader, self.writer = await connect(self.host, self.port, self.timeout)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.writer.close()

    async def call(self, frame: bytes, what: str) -> bytes:
        try:
            self.writer.write(frame)
            await self.writer.drain()
            return await asyncio.wait_for(read_frame(self.reader), self.timeout)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.TimeoutError) as exc:
            raise ReplayError(f"{self.host}:{self.port} did not answer {what}: {reason(exc)}") from None

    async def call_many(self, frames: list[bytes], what: str) -> list[bytes]:
        """Pipelined: every frame sent at once, the answers read in order (Kafka answers a connection's requests
        in the order they came)."""
        try:
            self.writer.write(b"".join(frames))
            await self.writer.drain()
            return [await asyncio.wait_for(read_frame(self.reader), self.timeout) for _ in frames]
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.TimeoutError) as exc:
            raise ReplayError(f"{self.host}:{self.port} did not answer {what}: {reason(exc)}") from None

    async def kio(self, request, what: str):
        self.corr += 1
        payload = await self.call(encode_request(int(request.__api_key__), self.corr, request, CLIENT_ID), what)
        return decode_response(payload, int(request.__api_key__), int(request.__version__))[1]

    async def api_versions(self) -> dict[int, tuple[int, int]]:
        from kio.schema.api_versions.v0.request import ApiVersionsRequest

        body = await self.kio(ApiVersionsRequest(), "ApiVersions")
        return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in body.api_keys}

    async def cluster(self) -> ClusterView:
        """Metadata v12 of every topic."""
        from kio.schema.metadata.v12.request import MetadataRequest

        body = await self.kio(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                              include_topic_authorized_operations=False), "Metadata")
        known = [t for t in body.topics if t.name and t.topic_id is not None and not int(t.error_code)]
        leaders = {}
        for t in known:
            by_index = {int(p.partition_index): int(p.leader_id) for p in t.partitions}
            leaders[t.name] = [by_index.get(i, -1) for i in range(len(t.partitions))]
        return ClusterView({int(b.node_id): (b.host, int(b.port)) for b in body.brokers},
                           {t.name: t.topic_id for t in known}, leaders)

    async def create_topics(self, topics: dict[str, int], node: int | None) -> None:
        """Creates `topics` (name -> partitions); on a cluster, every partition on `node` alone, the broker the
        replay sends all its fetches to (elsewhere they would answer NOT_LEADER_OR_FOLLOWER)."""
        from kio.schema.create_topics.v4.request import (CreatableReplicaAssignment, CreatableTopic,
                                                         CreateTopicsRequest)
        from kio.schema.types import BrokerId, TopicName
        from kio.static.primitive import i16, i32, i32Timedelta

        def topic(name: str, partitions: int) -> CreatableTopic:
            if node is None:
                return CreatableTopic(name=TopicName(name), num_partitions=i32(partitions), replication_factor=i16(1),
                                      assignments=(), configs=())
            return CreatableTopic(name=TopicName(name), num_partitions=i32(-1), replication_factor=i16(-1), configs=(),
                                  assignments=tuple(CreatableReplicaAssignment(partition_index=i32(i),
                                                                               broker_ids=(BrokerId(node),))
                                                    for i in range(partitions)))

        request = CreateTopicsRequest(
            topics=tuple(topic(n, p) for n, p in topics.items()),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=self.timeout)), validate_only=False)
        body = await self.kio(request, "CreateTopics")
        failed = [f"{t.name} ({int(t.error_code)}: {t.error_message or 'no message'})" for t in body.topics
                  if int(t.error_code) not in (0, TOPIC_ALREADY_EXISTS)]
        if failed:
            raise ReplayError(f"{self.host}:{self.port} refused to create {', '.join(failed)}")

    async def produce(self, counts: dict[tuple[str, int], int], produce_max: int, patience_s: float) -> int:
        """Writes `counts` records into each partition, in batches; the records written. A partition that is
        not ready (a leader moving on a cluster just started) is tried again for up to `patience_s`."""
        import importlib

        from fetchtool.broker.rawclient import make_batch

        version = min(9, produce_max)   # v13 would need topic ids; v3-v12 all take names
        mod = importlib.import_module(f"kio.schema.produce.v{version}.request")
        from kio.static.primitive import i32Timedelta

        loop = asyncio.get_running_loop()
        deadline = loop.time() + patience_s
        left = dict(counts)
        written = 0
        while left:
            sent: dict[tuple[str, int], int] = {}
            by_topic: dict[str, list] = {}
            for (topic, partition), n in left.items():
                sent[(topic, partition)] = take = min(n, BATCH_RECORDS)
                by_topic.setdefault(topic, []).append(
                    mod.PartitionProduceData(index=partition, records=make_batch([VALUE] * take)))
            request = mod.ProduceRequest(
                transactional_id=None, acks=1, timeout=i32Timedelta.parse(datetime.timedelta(seconds=self.timeout)),
                topic_data=tuple(mod.TopicProduceData(name=t, partition_data=tuple(p)) for t, p in by_topic.items()))
            body = await self.kio(request, "Produce")
            retry = False
            for t in body.responses:
                for p in t.partition_responses:
                    key, code = (t.name, int(p.index)), int(p.error_code)
                    if code == 0:
                        written += sent[key]
                        left[key] -= sent[key]
                        if not left[key]:
                            del left[key]
                    elif code not in NOT_READY or loop.time() > deadline:
                        raise ReplayError(f"{self.host}:{self.port} refused records for {t.name}-{p.index}: "
                                          f"error {code}")
                    else:
                        retry = True
            if retry:
                await asyncio.sleep(0.05)
        return written

    async def probe(self, version: int, mapping: TopicMapping, partitions: list[tuple[str, int]]) -> list:
        """One sessionless Fetch (0, -1) of every partition at offset 0: creates no session, finds leaders."""
        data = {TopicIdPartition(mapping.ids.get(t) or uuid.UUID(int=0), t, p):
                PartitionData(0, -1, 1, -1, -1, mapping.ids.get(t) or uuid.UUID(int=0)) for t, p in partitions}
        self.corr += 1
        frame = fetch_request(version, self.corr, CLIENT_ID, FetchMetadata.LEGACY, data, [], mapping, 0, 1, 1, 0)
        return not_ready(fetch_response(await self.call(frame, "Fetch"), version, mapping), partitions)


async def prepare(host: str, port: int, topics: dict[str, int], low: dict, high: dict, *, create: bool,
                  timeout: float, prefill_limit: int, probe_version: int, ready_s: float = 30.0) -> Target:
    """Readies the target for a plan: its Fetch versions, the topic ids by name, the missing topics created (with
    `create`) and filled with records up to the rebased captured offsets, and a leader for every partition."""
    target = Target()
    async with _Admin(host, port, timeout) as admin:
        versions = await admin.api_versions()
        target.fetch_versions = versions.get(FETCH)
        view = await admin.cluster()
        target.node_id = view.node_of(host, port)
        target.topic_ids = view.topic_ids
        missing = sorted(set(topics) - set(target.topic_ids))
        if missing and not create:
            raise ReplayError(f"{host}:{port} has no topic(s) {', '.join(missing)}; create them or pass "
                              f"--create-topics")
        if missing:
            on_cluster = target.node_id if len(view.brokers) > 1 else None
            await admin.create_topics({n: topics[n] for n in missing}, on_cluster)
            target.created = missing
            view = await _listed(admin, missing, ready_s)
            target.topic_ids = view.topic_ids
        target.partitions = {name: len(leaders) for name, leaders in view.leaders.items()}
        target.led_elsewhere = view.led_elsewhere(target.node_id, topics)
        if target.led_elsewhere:
            t, p = target.led_elsewhere[0]
            target.notes.append(f"{len(target.led_elsewhere)} partition(s) (e.g. {t}-{p}) are led by other brokers "
                                f"than {host}:{port}, which every replayed fetch goes to: they will answer "
                                f"NOT_LEADER_OR_FOLLOWER")
        for name, (have, need) in short_topics(topics, target.partitions).items():
            absent = f"partition {have}" if have == need - 1 else f"partitions {have}-{need - 1}"
            target.notes.append(f"{name} has {have} partition(s) on {host}:{port}, the capture fetches {need}: "
                                f"{absent} will answer UNKNOWN_TOPIC_OR_PARTITION")
        elsewhere = set(target.led_elsewhere)
        partitions = [(t, p) for t, n in topics.items() for p in range(min(n, target.partitions.get(t, n)))
                      if (t, p) not in elsewhere]
        mapping = TopicMapping(target.topic_ids, {str(v): k for k, v in target.topic_ids.items()}, {})
        target.ready_after_probes = await _led(admin, fetch_version(probe_version, target.fetch_versions), mapping,
                                               partitions, ready_s)
        counts = records_to_write(low, high, target.created, prefill_limit)
        if counts and PRODUCE in versions:
            target.written = await admin.produce(counts, versions[PRODUCE][1], ready_s)
        elif counts:
            target.notes.append(f"{host}:{port} does not list Produce: the created topics stay empty")
    return target


async def _listed(admin: _Admin, created: list[str], ready_s: float) -> ClusterView:
    """Metadata once it lists the topics just created: CreateTopics can answer before the broker's metadata has
    them, and until then there is no topic id to send (seen on a three-node cluster just started)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ready_s
    view = await admin.cluster()
    while set(created) - set(view.topic_ids):
        if loop.time() > deadline:
            raise ReplayError(f"{admin.host}:{admin.port} created {', '.join(created)} but its Metadata did not "
                              f"list them within {ready_s:g} s")
        await asyncio.sleep(0.05)
        view = await admin.cluster()
    return view


async def _led(admin: _Admin, version: int, mapping: TopicMapping, partitions: list[tuple[str, int]],
               ready_s: float) -> int:
    """Probes until every partition answers with a leader; the probes it took. Without the wait the replayed
    clients' first fetches got NOT_LEADER_OR_FOLLOWER, an error the capture never had."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ready_s
    probes = 0
    while True:
        probes += 1
        waiting = await admin.probe(version, mapping, partitions)
        if not waiting:
            return probes
        if loop.time() > deadline:
            t, p, code = waiting[0]
            raise ReplayError(f"{admin.host}:{admin.port}: {len(waiting)} partition(s) still without a leader "
                              f"after {ready_s:g} s (e.g. {t}-{p}: error {code})")
        await asyncio.sleep(0.05)


async def close_sessions(host: str, port: int, sessions: list[tuple[int, int]], timeout: float) -> int:
    """Closes each (Fetch version, session id) with a full sessionless Fetch (id, -1), as a Java consumer's close()
    does; Kafka closes any session a full request names, whichever connection it comes on. The sessions closed."""
    if not sessions:
        return 0
    closed = 0
    mapping = TopicMapping({}, {}, {})
    async with _Admin(host, port, timeout) as admin:
        # in batches, pipelined: one round trip per batch, not per session (10,000 sessions at a replay's end)
        for start in range(0, len(sessions), CLOSE_BATCH):
            batch = sessions[start:start + CLOSE_BATCH]
            frames = []
            for version, session_id in batch:
                admin.corr += 1
                frames.append(fetch_request(version, admin.corr, CLIENT_ID, FetchMetadata(session_id, -1), {}, [],
                                            mapping, 0, 1, 1, 0))
            for (version, _id), payload in zip(batch, await admin.call_many(frames, "Fetch")):
                closed += not fetch_response(payload, version, mapping).error_code
    return closed
