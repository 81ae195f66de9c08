"""Two brokers, one script: the same abstract Fetch steps sent to Apache Kafka and to `fetchtool broker`.

A step names connections and sessions abstractly ("on connection 1, the second live session, at its next epoch");
each broker side turns it into its own request with its own session ids, epochs and topic ids, and reduces the answer to
what must agree between the two: top-level error, the session outcome (none / same / a new id, with the cache shard
the id falls in), and every returned partition with its error, offsets, record bytes and aborted-transactions
null-ness. Session ids, topic ids and timing are left out. Plain sockets on both sides (fetchtool's RawClient).
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from fetchtool.broker.rawclient import RawClient, make_batch
from fetchtool.sessions import MAX_INT

TOPICS = {"a": 3, "b": 2}
GHOST = "ghost"                       # a topic neither broker has (v12: by name, v13+: by this id)
GHOST_ID = uuid.UUID("0badc0de-0000-4000-8000-00000000dead")
NULL = "null-id"                      # v13+: the all-zero topic id; v12: a topic name neither broker has
ZERO_ID = uuid.UUID(int=0)
SHARDS = 8                            # Kafka 4.x: KafkaBroker's NumFetchSessionCacheShards
SHARD_RANGE = MAX_INT // SHARDS
CLIENTS = 3
NEXT, STALE, FUTURE = "next", "stale", "future"


@dataclass(frozen=True)
class Fetch:
    """One Fetch request in abstract form.

    ``client``: the connection it goes on. ``session_of``: which session it names, k for the k-th (mod their
    number) of the sessions this side granted and still holds, in grant order (None, or none held: SessionId 0).
    ``epoch``: 0 (full), -1 (close or sessionless), NEXT (the epoch the broker expects), STALE (the one before) or
    FUTURE (a few ahead).
    ``literal_id`` replaces the session id by a number that is nobody's (unknown, negative or out of the shards).
    """

    client: int
    version: int
    epoch: int | str
    session_of: int | None = None
    partitions: tuple[tuple[str, int, int], ...] = ()   # (topic, partition, fetch offset)
    forgotten: tuple[tuple[str, int], ...] = ()
    replica_id: int = -1
    read_committed: bool = False
    literal_id: int | None = None
    leader_epoch: int = -1                              # every partition's CurrentLeaderEpoch (-1: none)
    partition_max_bytes: int = 1 << 20
    max_bytes: int = 0x7FFFFFFF


@dataclass(frozen=True)
class Produce:
    topic: str
    partition: int
    records: int


Step = Fetch | Produce


@dataclass
class Side:
    """One broker as the script sees it: connections, topic ids and the sessions it granted."""

    name: str
    port: int
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    clients: list[RawClient] = field(default_factory=list)
    sessions: dict[int, int] = field(default_factory=dict)   # session id -> next epoch, in grant order
    granted: set[int] = field(default_factory=set)

    def connect(self) -> None:
        self.clients = [RawClient("127.0.0.1", self.port, client_id=f"diff-{k}") for k in range(CLIENTS)]
        self.topic_ids = metadata_topic_ids(self.clients[0])

    def close(self) -> None:
        for c in self.clients:
            c.close()

    @property
    def names(self) -> dict[uuid.UUID, str]:
        return {v: k for k, v in self.topic_ids.items()} | {GHOST_ID: GHOST, ZERO_ID: NULL}

    # -- one step
    def run(self, step: Step) -> tuple:
        if isinstance(step, Produce):
            return produce(self.clients[0], step)
        session_id, epoch = self._metadata(step)
        response = self.clients[step.client].call(self._request(step, session_id, epoch))
        self._observe(step, session_id, epoch, response)
        return summarize(response, session_id, self.names)

    def _metadata(self, step: Fetch) -> tuple[int, int]:
        if step.version < 7:
            return 0, -1                                 # no session fields before v7: (0, -1) to both brokers
        held = list(self.sessions.items())
        named = held[step.session_of % len(held)] if held and step.session_of is not None else None
        session_id = step.literal_id if step.literal_id is not None else named[0] if named else 0
        if isinstance(step.epoch, int):
            return session_id, step.epoch
        expected = named[1] if named else 1
        if step.epoch == NEXT:
            return session_id, expected
        if step.epoch == STALE and expected > 1:
            return session_id, expected - 1
        return session_id, expected + 5      # FUTURE, or STALE with no earlier epoch to go back to

    def _request(self, step: Fetch, session_id: int, epoch: int):
        return fetch_request(step, session_id, epoch, self.topic_ids)

    def _observe(self, step: Fetch, session_id: int, epoch: int, response) -> None:
        """Track the sessions this broker granted, from its own answers only."""
        error, got = int(getattr(response, "error_code", 0)), int(getattr(response, "session_id", 0))
        held = session_id in self.sessions
        if epoch in (0, -1):
            self.sessions.pop(session_id, None)          # any session named in a full request is closed
            if epoch == 0 and error == 0 and got:
                self.sessions[got] = 1
                self.granted.add(got)
        elif held and error == 0 and got == session_id:
            self.sessions[session_id] = epoch + 1
        elif held and (error == 70 or (error == 0 and got == 0)):
            del self.sessions[session_id]                # evicted, or forgot its last partition (closed)

    def close_all(self, also: set[int] = frozenset()) -> None:
        """Close every session this side granted, and ``also`` these (an unknown id in a full request is a no-op):
        a session can exist that no answer named (a follower's, created before Kafka failed to build the
        response, see fetchtool.broker.fetch._unnamed_zero_id_not_last)."""
        for sid in sorted(self.granted | set(also)):
            self.clients[0].call(fetch_request(Fetch(0, 12, -1), sid, -1, self.topic_ids))
        self.granted.clear()
        self.sessions.clear()


# ---------------------------------------------------------------------------------------------- wire
def fetch_module(version: int):
    return importlib.import_module(f"kio.schema.fetch.v{version}.request")


def fetch_request(step: Fetch, session_id: int, epoch: int, topic_ids: dict[str, uuid.UUID]):
    m = fetch_module(step.version)
    ids = topic_ids | {GHOST: GHOST_ID, NULL: ZERO_ID}

    def key(topic: str) -> dict:
        return {"topic_id": ids[topic]} if step.version >= 13 else {"topic": topic}

    grouped: list[tuple[str, list]] = []      # consecutive partitions of a topic share an entry, as clients do
    for topic, partition, offset in step.partitions:
        if not grouped or grouped[-1][0] != topic:
            grouped.append((topic, []))
        grouped[-1][1].append(
            _make(m.FetchPartition, partition=partition, fetch_offset=offset,
                  partition_max_bytes=step.partition_max_bytes, current_leader_epoch=step.leader_epoch))
    forgotten: dict[str, list[int]] = {}
    for topic, partition in step.forgotten:
        forgotten.setdefault(topic, []).append(partition)
    replica = {"replica_id": step.replica_id}
    if step.version >= 15:
        replica = {"replica_state": m.ReplicaState(replica_id=step.replica_id, replica_epoch=-1)}
    return _make(m.FetchRequest, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=step.max_bytes,
                 isolation_level=int(step.read_committed), session_id=session_id, session_epoch=epoch,
                 topics=tuple(_make(m.FetchTopic, partitions=tuple(ps), **key(t)) for t, ps in grouped),
                 forgotten_topics_data=tuple(_make(m.ForgottenTopic, partitions=tuple(ps), **key(t))
                                             for t, ps in forgotten.items()) if step.version >= 7 else (),
                 **replica)


def summarize(response, session_id: int, names: dict[uuid.UUID, str]) -> tuple:
    """What must agree: (error, session outcome, partitions). A new session id is reduced to its cache shard."""
    got = int(getattr(response, "session_id", 0))
    if got == 0:
        session = "none"
    elif got == session_id:
        session = "same"
    else:
        session = f"new in shard {got // SHARD_RANGE}"
    parts = []
    for t in response.responses:
        topic = getattr(t, "topic", None) or names.get(getattr(t, "topic_id", None), "?")
        for p in t.partitions:
            leader = getattr(p, "current_leader", None)
            parts.append((topic, p.partition_index, int(p.error_code), p.high_watermark, p.last_stable_offset,
                          getattr(p, "log_start_offset", None), len(p.records or b""),
                          "aborted=null" if p.aborted_transactions is None else f"aborted={len(p.aborted_transactions)}",
                          None if leader is None else (leader.leader_id, leader.leader_epoch)))
    endpoints = tuple(sorted(e.node_id for e in getattr(response, "node_endpoints", ()) or ()))
    return int(getattr(response, "error_code", 0)), session, tuple(parts), response.throttle_time, endpoints


def produce(client: RawClient, step: Produce) -> tuple:
    m = importlib.import_module("kio.schema.produce.v9.request")
    values = [b"v%d" % i for i in range(step.records)]
    data = m.PartitionProduceData(index=step.partition, records=make_batch(values, key=b"k"))
    request = m.ProduceRequest(transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=10),
                               topic_data=(m.TopicProduceData(name=step.topic, partition_data=(data,)),))
    p = client.call(request).responses[0].partition_responses[0]
    return ("produce", int(p.error_code), p.base_offset)


def metadata_topic_ids(client: RawClient) -> dict[str, uuid.UUID]:
    m = importlib.import_module("kio.schema.metadata.v12.request")
    request = m.MetadataRequest(topics=tuple(m.MetadataRequestTopic(topic_id=None, name=t) for t in TOPICS),
                                allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    return {t.name: t.topic_id for t in client.call(request).topics if int(t.error_code) == 0}


def wait_until_served(side: Side, timeout_s: float = 30) -> None:
    """A new topic answers NOT_LEADER_OR_FOLLOWER for a moment after Metadata lists it (Kafka); wait it out."""
    every = tuple((t, p, 0) for t, n in TOPICS.items() for p in range(n))
    deadline = time.monotonic() + timeout_s
    while True:
        parts = side.run(Fetch(0, 12, -1, partitions=every))[2]
        if all(p[2] == 0 for p in parts):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{side.name}: partitions still unreadable: {parts}")
        time.sleep(0.1)


# ---------------------------------------------------------------------------------------------- Kafka's counter
_PLACED = re.compile(r"\] (Created fetch session FetchSession|No fetch session created for privileged=)")


def kafka_full_contexts(sessions_log: Path) -> int:
    """How far Kafka's round-robin shard counter has moved. FullFetchContext.updateAndGenerateResponseData takes
    the next shard and calls its maybeCreateSession, which logs (DEBUG) either line, once per counter step. (The
    FetchManager's 'Created a new full FetchContext' lines overcount: a response that then fails to build, see
    fetchtool.broker.fetch._unnamed_zero_id_not_last, never reaches the counter.)"""
    text = sessions_log.read_text(errors="replace")
    return sum(1 for line in text.splitlines() if _PLACED.search(line))


_CREATED = re.compile(r"\] Created fetch session FetchSession\(id=(\d+),")


def kafka_sessions_created(sessions_log: Path, since: int = 0) -> tuple[set[int], int]:
    """The ids of the sessions Kafka created after byte ``since`` of its log, and the log's size now."""
    with open(sessions_log, "rb") as f:
        f.seek(since)
        text = f.read().decode(errors="replace")
    return {int(m) for m in _CREATED.findall(text)}, since + len(text.encode())


def _make(cls, **values):
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})
