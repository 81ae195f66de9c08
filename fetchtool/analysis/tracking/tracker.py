"""The session tracker: decoded exchanges in, the life of every fetch session and every client out.

Sans-IO: `SessionTracker.feed(exchange)` takes one Exchange at a time (in request order, as the decoder yields
them) and returns an `Observation` saying what the exchange did to which session; `finish()` gives the
summaries. State is per session and per client, never per partition row, so memory stays bounded on big
captures. Kafka's session rules (what is full, which epoch comes next) come from fetchtool.sessions.

Sessions are keyed by (broker, session id): the broker does not bind a session to a connection or principal,
so a session survives a reconnect, and a client may hold sessions on several brokers.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import cast
from operator import attrgetter

from fetchtool._fast import fast_constructor
from fetchtool.exchange import FETCH, FETCH_SNAPSHOT, Exchange
from fetchtool.sessions.metadata import FINAL_EPOCH, INITIAL_EPOCH, FetchMetadata, next_epoch

from fetchtool.analysis.diagnosis.occupancy import Occupancy
from fetchtool.analysis.tracking.connections import ClosedConnections, ConnectionState
from fetchtool.analysis.tracking.steps import StepLog
from fetchtool.analysis.tracking.steps import append as append_step
from fetchtool.analysis.tracking.steps import count as count_steps
from fetchtool.analysis.tracking.steps import unpack as unpack_steps
from fetchtool.analysis.tracking.cache_events import ABSENT, CLOSE, CREATE, PRESENT, REFUSE, TOUCH, CacheLog
from fetchtool.analysis.model import CLOSE as CLOSE_KIND
from fetchtool.analysis.model import closes_a_session, owner
from fetchtool.analysis.model import (
    ALIVE,
    CLOSED,
    FULL,
    FULL_CREATE,
    INCREMENTAL,
    LOST,
    SESSIONLESS,
    SNAPSHOT,
    BrokerSummary,
    ClientSummary,
    SessionLife,
)

FETCH_SESSION_ID_NOT_FOUND = 70
MAX_STEPS = 2000  # per session; the rest is counted, not kept (memory bound on long captures)
RECENT = 16  # requests per session kept for duplicate / concurrency evidence
SHARED_PARTS = 64  # sessions created with up to this many partitions share the set until it changes


def host_of(address: str) -> str:
    return address.rsplit(":", 1)[0]


def grants_session(ex: Exchange) -> bool:
    """The broker shown to keep fetch sessions: an error-free Fetch response carrying a session id. Brokers
    without KIP-227 (tansu, noida-db) or with no cache slots answer every fetch with session id 0."""
    return ex.error_code == 0 and bool(ex.response_session_id)


def partition_key(p) -> tuple:
    """A partition's identity within a session: by topic id when on the wire (v13+), else by name."""
    return (p.topic_id or p.topic, p.partition)


@dataclass(frozen=True, slots=True)
class SentRequest:
    """A request of a session, kept briefly as evidence (duplicates, requests in flight)."""

    epoch: int
    file: str
    request_frame: int | None
    response_frame: int | None
    ts: float | None
    response_ts: float | None
    conn: int
    error_code: int | None


class TrackedSession:
    """A session's mutable state while the capture is read (one per (broker, session id))."""

    __slots__ = (
        "broker", "session_id", "client_key", "client", "client_id", "file", "created_request_frame",
        "created_response_frame", "created_ts", "created_version", "before_capture", "first_partitions",
        "parts", "max_parts", "incremental", "errors", "last_epoch", "expected_epoch", "end", "end_reason",
        "end_frame", "end_ts", "conns", "steps", "dropped", "last_success", "last_request_ts", "recent",
        "closed_ts", "error_ts", "error_conn_changed", "uses_topic_ids", "last_conn", "versions_before",
        "created_on_reconnect", "replica_id", "forgotten_keys", "traffic",
    )  # fmt: skip

    def __init__(self, broker: str, session_id: int, ex: Exchange, client_key: tuple,
                 client_id: str | None = None) -> None:
        self.broker = broker
        self.session_id = session_id
        self.client_key = client_key
        self.client = ex.client
        self.client_id = client_id if client_id == ex.client_id else ex.client_id  # its client's string (memory)
        self.file = ex.file
        self.created_request_frame = self.created_response_frame = self.created_ts = None
        self.created_version = None
        self.before_capture = False
        self.first_partitions = ex.partitions
        # a frozenset shared by the sessions created with the same partitions, until one changes (memory)
        self.parts: set | frozenset = set()
        self.max_parts = 0
        self.incremental = 0
        self.errors = 0
        self.last_epoch: int | None = None
        self.expected_epoch: int | None = None  # the epoch the broker expects next (None: unknown)
        self.end = ALIVE
        self.end_reason: str | None = None
        self.end_frame: int | None = None
        self.end_ts: float | None = None
        self.conns: int | set[int] = ex.conn  # its connection ids: one id until a second one is seen (memory)
        self.steps: StepLog = bytearray()  # its requests, packed (tracking.steps)
        self.dropped = 0
        self.last_success: SentRequest | None = None
        self.last_request_ts: float | None = None
        self.recent: list[SentRequest] = []  # the last RECENT (a list: a deque's block is 600 bytes a session)
        self.closed_ts: float | None = None  # when a full request named it (the broker removed it)
        self.error_ts: float | None = None  # first FETCH_SESSION_ID_NOT_FOUND
        self.error_conn_changed = False  # that error came on another connection than the last success
        self.uses_topic_ids: bool | None = None
        self.last_conn = ex.conn
        self.versions_before: frozenset[int] = frozenset()  # Fetch versions its client used with this broker before
        self.created_on_reconnect = False  # created on another connection than its client's previous request
        self.replica_id = ex.replica_id
        self.forgotten_keys: set | None = None  # a session alive before the capture: partitions it forgot in it
        self.traffic = None  # its own client's fetches in it (tracking.traffic.TrafficStats), once there are some

    @property
    def key(self) -> tuple[str, int]:
        return (self.broker, self.session_id)

    @property
    def live(self) -> bool:
        return self.end == ALIVE

    # What analysis.shown.choose reads of a session, under its SessionLife's names: a report picks the sessions
    # it lists from the tracked ones, and makes the lives of those only.
    @property
    def started_before_capture(self) -> bool:
        return self.before_capture

    @property
    def incremental_requests(self) -> int:
        return self.incremental

    @property
    def owner(self) -> str:
        return owner(self.client_id, self.client, self.replica_id)

    def life(self) -> SessionLife:
        return SessionLife(
            broker=self.broker, session_id=self.session_id, client=self.client, client_id=self.client_id,
            file=self.file, created_request_frame=self.created_request_frame,
            created_response_frame=self.created_response_frame, created_ts=self.created_ts,
            created_version=self.created_version, started_before_capture=self.before_capture,
            first_partitions=self.first_partitions, partitions=len(self.parts), max_partitions=self.max_parts,
            incremental_requests=self.incremental, errors=self.errors, last_epoch=self.last_epoch, end=self.end,
            end_reason=self.end_reason, end_frame=self.end_frame, end_ts=self.end_ts,
            connections=1 if isinstance(self.conns, int) else len(self.conns), steps=unpack_steps(self.steps), steps_dropped=self.dropped,
            replica_id=self.replica_id,
        )  # fmt: skip


class TrackedClient:
    __slots__ = ("client_id", "host", "addresses", "brokers", "software", "versions", "kinds", "exchanges",
                 "sessions", "errors", "conns", "broker_versions", "key")  # fmt: skip

    def __init__(self, client_id: str | None, host: str) -> None:
        self.client_id = client_id
        self.host = host
        self.key = (host, client_id)
        self.addresses: dict[str, None] = {}
        self.brokers: dict[str, None] = {}
        self.software: dict[str, None] = {}
        self.versions: Counter = Counter()
        self.kinds: Counter = Counter()
        self.exchanges = 0
        self.sessions: dict[tuple[str, int], None] = {}
        self.errors: Counter = Counter()
        self.conns: dict[str, int] = {}  # broker -> last connection used
        self.broker_versions: dict[str, set[int]] = {}  # broker -> Fetch versions used with it so far

    def summary(self) -> ClientSummary:
        return ClientSummary(
            client_id=self.client_id, host=self.host, addresses=tuple(self.addresses), brokers=tuple(self.brokers),
            software=tuple(self.software), fetch_versions={f"v{v}": n for v, n in sorted(self.versions.items())},
            request_kinds=dict(self.kinds), exchanges=self.exchanges, sessions=tuple(self.sessions),
            errors={str(k): v for k, v in sorted(self.errors.items())},
        )  # fmt: skip


class TrackedBroker:
    __slots__ = ("broker", "exchanges", "clients", "created", "sessions", "refused", "errors", "granted",
                 "cache_events", "max_live", "occupancy", "connections", "closed", "connections_seen")

    def __init__(self, broker: str) -> None:
        self.broker = broker
        self.exchanges = 0
        self.clients: set[tuple] = set()
        self.created: list[TrackedSession] = []  # sessions created in the capture, in creation order
        self.sessions: dict[int, TrackedSession] = {}  # latest session per id
        self.refused = 0
        self.errors: Counter = Counter()
        self.granted = False  # ever shown to keep a session (grants_session)
        self.cache_events = CacheLog()  # what each exchange did to the broker's cache (analysis.shadow)
        self.max_live = 0  # most sessions cached at once, from the shadow cache (set when the analysis ends)
        self.occupancy: Occupancy | None = None  # its live sessions over time (analysis.diagnosis.occupancy), set with max_live
        self.connections: dict[int, ConnectionState] = {}  # by id, while open (analysis.connections)
        self.closed = ClosedConnections()  # those that closed with nothing in flight
        self.connections_seen = 0

    def cache_event(self, t: float | None, kind: int, session_id: int, size: int, privileged: bool,
                    key=None) -> None:
        if t is not None:
            self.cache_events.append(int(t * 1000), kind, session_id, size, privileged, key)

    def summary(self, sessions: list[TrackedSession]) -> BrokerSummary:
        """``sessions``: every session seen on this broker."""
        return BrokerSummary(
            broker=self.broker, exchanges=self.exchanges, clients=len(self.clients),
            sessions_created=len(self.created), sessions_seen=len(sessions),
            max_live_sessions=self.max_live, cache_occupancy=self.occupancy,
            refused_creations=self.refused, errors={str(k): v for k, v in sorted(self.errors.items())},
        )  # fmt: skip


@dataclass(slots=True)
class Observation:
    """What one exchange meant, with the session state just before it (the evidence findings need)."""

    exchange: Exchange
    kind: str
    client: TrackedClient
    session: TrackedSession | None  # the session the request named (incremental / close), if any
    expected_epoch: int | None  # what the broker expected before this request (None: unknown)
    prev_success: SentRequest | None  # the session's last successful request before this one
    prev_requests: tuple[SentRequest, ...]  # the session's recent requests before this one (errors only)
    refused: bool  # a session-creating full request answered with session id 0 (no slot)
    reconnected: bool  # the client used another connection to this broker than for its previous request
    dropped: bool = False  # an incremental answered with session id 0, no error, while partitions remained


class SessionTracker:
    """Feed exchanges in request order; read sessions, clients and brokers at the end."""

    def __init__(self) -> None:
        self.clients: dict[tuple, TrackedClient] = {}
        self.brokers: dict[str, TrackedBroker] = {}
        self.sessions: list[TrackedSession] = []  # every session seen, in order of first sight
        self._keys: dict[tuple, tuple] = {}  # partition keys, interned
        self._part_sets: dict[frozenset, frozenset] = {}  # sessions' partitions at creation, interned
        self._versions: dict[frozenset[int], frozenset[int]] = {}  # versions_before sets, interned

    def _frozen(self, versions) -> frozenset[int]:
        f = frozenset(versions)
        return self._versions.setdefault(f, f)

    # -- feeding -------------------------------------------------------------------------------------------
    def feed(self, ex: Exchange) -> Observation:
        host = host_of(ex.client)
        ckey = (host, ex.client_id)
        client = self.clients.get(ckey)
        if client is None:
            client = self.clients[ckey] = TrackedClient(ex.client_id, host)
        ckey = client.key  # the first one: sessions keep it (memory: one tuple per client, not per session)
        broker = self.brokers.get(ex.broker)
        if broker is None:
            broker = self.brokers[ex.broker] = TrackedBroker(ex.broker)
        client.exchanges += 1
        client.addresses[ex.client] = None
        client.brokers[ex.broker] = None
        if ex.client_software:
            client.software[ex.client_software] = None
        broker.exchanges += 1
        broker.clients.add(ckey)
        if ex.error_code:
            client.errors[ex.error_code] += 1
            broker.errors[ex.error_code] += 1
        cs = broker.connections.get(ex.conn)
        if cs is None:
            cs = broker.connections[ex.conn] = ConnectionState(ex.conn, ex.client, ex.client_id, ex.ts or 0.0,
                                                               broker.connections_seen)
            broker.connections_seen += 1
        cs.seen(ex.ts, ex.response_ts, ex.response_frame is not None, ex.request_frame, ex.max_wait_ms)
        prev_conn = client.conns.get(ex.broker)
        client.conns[ex.broker] = ex.conn
        reconnected = prev_conn is not None and prev_conn != ex.conn

        if ex.api_key == FETCH_SNAPSHOT:
            client.kinds[SNAPSHOT] += 1
            return Observation(ex, SNAPSHOT, client, None, None, None, (), False, reconnected)
        client.versions[ex.api_version] += 1

        sid = ex.session_id or 0
        epoch = ex.session_epoch if ex.session_epoch is not None else FINAL_EPOCH
        meta = FetchMetadata(sid, epoch)
        if meta.is_full:
            obs = self._full(ex, meta, client, broker, ckey, reconnected, cs.named_id)
            cs.named_id = sid
        else:
            obs = self._incremental(ex, meta, client, broker, ckey, reconnected)
            cs.named_id = 0
        versions = client.broker_versions.get(ex.broker)
        if versions is None:
            versions = client.broker_versions[ex.broker] = set()
        versions.add(ex.api_version)
        return obs

    def _full(self, ex, meta, client, broker, ckey, reconnected, named_before: int) -> Observation:
        named = None
        closing = closes_a_session(meta.session_id, meta.epoch, named_before)
        if meta.session_id and (meta.epoch != FINAL_EPOCH or closing):
            # Any session named by a full request is closed by the broker (no ownership check).
            named = broker.sessions.get(meta.session_id)
            broker.cache_event(ex.ts, CLOSE, meta.session_id, 0, False, named)
            if named is not None and named.live:
                how = "(id, -1)" if meta.epoch == FINAL_EPOCH else "(id, 0) (close and re-create)"
                self._end(named, CLOSED, f"closed by the client's {how} request", ex.request_frame, ex.ts)
                named.closed_ts = ex.ts
            if named is not None:
                self._step(named, ex, CLOSE_KIND if meta.epoch == FINAL_EPOCH else FULL, 0, 0)
        refused = False
        if meta.epoch == FINAL_EPOCH:
            kind = CLOSE_KIND if closing else SESSIONLESS
        else:
            kind = FULL
            rsid = ex.response_session_id
            if ex.error_code == 0 and rsid:
                kind = FULL_CREATE
                created = self._create(ex, rsid, client, broker, ckey)
                created.versions_before = self._frozen(client.broker_versions.get(ex.broker, ()))
                created.created_on_reconnect = reconnected
            elif ex.error_code == 0 and rsid == 0 and ex.response_partitions is not None:
                throttled = (ex.throttle_time_ms or 0) > 0 and not ex.response_partitions and ex.partitions
                if not throttled:
                    refused = True
                    broker.refused += 1
                    broker.cache_event(ex.response_ts or ex.ts, REFUSE, 0, len(ex.request_partitions),
                                       _privileged(ex))
        if ex.api_version < 7:
            kind = SESSIONLESS
        client.kinds[kind] += 1
        return Observation(ex, kind, client, named, None, None, (), refused, reconnected)

    def _create(self, ex, rsid, client, broker, ckey) -> TrackedSession:
        old = broker.sessions.get(rsid)
        if old is not None and old.live:  # an id reused: the old one must be gone
            self._end(old, LOST, "its id was issued again to a new session", ex.response_frame, ex.ts)
        s = TrackedSession(broker.broker, rsid, ex, ckey, client.client_id)
        s.created_request_frame = ex.request_frame
        s.created_response_frame = ex.response_frame
        # Kafka creates the session (creationMs) when it builds the response, after the long poll.
        s.created_ts = ex.response_ts if ex.response_ts is not None else ex.ts
        s.created_version = ex.api_version
        s.uses_topic_ids = ex.api_version >= 13
        keys = self._keys  # one tuple per partition key, shared by the sessions that hold it (memory)
        parts = frozenset(keys.setdefault(k, k) for k in map(partition_key, ex.request_partitions))
        s.parts = self._part_sets.setdefault(parts, parts) if len(parts) <= SHARED_PARTS else set(parts)
        s.max_parts = len(s.parts)
        s.expected_epoch = next_epoch(INITIAL_EPOCH)
        s.last_epoch = INITIAL_EPOCH
        sent = _sent(ex, INITIAL_EPOCH)
        s.last_success = sent
        s.last_request_ts = ex.ts
        _remember(s.recent, sent)
        self._step(s, ex, FULL_CREATE, len(s.parts), 0)
        broker.sessions[rsid] = s
        broker.created.append(s)
        broker.cache_event(s.created_ts, CREATE, rsid, len(s.parts), _privileged(ex), s)
        broker.granted = True  # grants_session(ex)
        client.sessions[s.key] = None
        self.sessions.append(s)
        return s

    def _incremental(self, ex, meta, client, broker, ckey, reconnected) -> Observation:
        sid, epoch = meta.session_id, meta.epoch
        client.kinds[INCREMENTAL] += 1
        s = broker.sessions.get(sid) if sid else None
        if s is None:
            # Alive before the capture started (or never existed): reconstruct it from here on.
            s = TrackedSession(broker.broker, sid, ex, ckey, client.client_id)
            s.before_capture = True
            s.uses_topic_ids = ex.api_version >= 13
            broker.sessions[sid] = s
            client.sessions[s.key] = None
            self.sessions.append(s)
        expected = s.expected_epoch
        prev_success = s.last_success
        err = ex.error_code
        prev_requests = tuple(s.recent) if err else ()
        conn_changed = s.last_conn != ex.conn
        if conn_changed or not isinstance(s.conns, int):
            if isinstance(s.conns, int):
                s.conns = {s.conns}
            s.conns.add(ex.conn)
        s.last_conn = ex.conn
        s.last_request_ts = ex.ts
        sent = _sent(ex, epoch)
        _remember(s.recent, sent)
        if err is None and ex.response_partitions is None:
            # Response not captured: assume the broker processed it (the usual case for a lost response; and
            # Kafka's newContext accepts an incremental request as it reads it, before any answer: a client that
            # closes its connection while the broker holds the fetch still moved the session's epoch on).
            added, forgotten = self._apply(s, ex, client)
            if epoch == expected or expected is None:
                s.incremental += 1
                s.last_epoch = epoch
            s.expected_epoch = next_epoch(epoch)
            broker.cache_event(ex.ts, TOUCH, sid, len(s.parts), _privileged(ex), s)
            self._step(s, ex, INCREMENTAL, added, forgotten)
            return Observation(ex, INCREMENTAL, client, s, expected, prev_success, prev_requests,
                               False, reconnected)  # fmt: skip
        return self._after_incremental(ex, s, client, broker, epoch, expected, prev_success, prev_requests,
                                       conn_changed, reconnected, sent)  # fmt: skip

    def _after_incremental(self, ex, s, client, broker, epoch, expected, prev_success, prev_requests,
                           conn_changed, reconnected, sent) -> Observation:  # fmt: skip
        err = ex.error_code
        dropped = False
        if err == 0 and ex.response_session_id == 0 and (ex.throttle_time_ms or 0) > 0 \
                and not ex.response_partitions:
            # A throttled answer (error NONE, session id 0, no partitions) says nothing about the session:
            # Kafka throttles a session error, or an emptied session, the same way.
            self._step(s, ex, INCREMENTAL, 0, 0)
        elif err == 0:
            broker.granted = broker.granted or grants_session(ex)
            added, forgotten = self._apply(s, ex, client)
            s.incremental += 1
            s.last_epoch = epoch
            s.expected_epoch = next_epoch(epoch)
            s.last_success = sent
            if s.before_capture and s.incremental == 1:
                s.first_partitions = len(s.parts)
            self._step(s, ex, INCREMENTAL, added, forgotten)
            if ex.response_session_id == 0:
                broker.cache_event(ex.ts, CLOSE, s.session_id, 0, False, s)
                left = session_left(s, ex)
                # Kafka ends a session this way only when the request emptied it (an unknown one gets error 70)
                dropped = bool(left)
                if s.live:
                    reason = ("every partition was forgotten" if left == 0 else
                              "answered with session id 0 after forgetting partitions" if left is None else
                              "the broker answered with session id 0 and no error while partitions remained")
                    self._end(s, CLOSED, reason, ex.response_frame, ex.ts)
            else:
                broker.cache_event(ex.ts, TOUCH, s.session_id, len(s.parts), _privileged(ex), s)
        elif err is not None:
            s.errors += 1
            self._step(s, ex, INCREMENTAL, 0, 0)
            broker.cache_event(ex.ts, ABSENT if err == FETCH_SESSION_ID_NOT_FOUND else PRESENT, s.session_id,
                               len(s.parts), _privileged(ex), s)
            if err == FETCH_SESSION_ID_NOT_FOUND:
                if s.error_ts is None:
                    s.error_ts = ex.ts
                    s.error_conn_changed = conn_changed
                if s.live:
                    self._end(s, LOST, "FETCH_SESSION_ID_NOT_FOUND", ex.response_frame, ex.ts)
        return Observation(ex, INCREMENTAL, client, s, expected, prev_success, prev_requests, False,
                           reconnected, dropped)  # fmt: skip

    def _apply(self, s: TrackedSession, ex: Exchange, client: TrackedClient | None = None) -> tuple[int, int]:
        if s.before_capture:
            return self._apply_unknown_start(s, ex, client)
        rows = ex.request_partitions
        if not rows:
            return 0, _forget(s, ex, remember=False)
        parts = _own_parts(s)
        before = len(parts)
        # (topic id or name, partition) per row; in C when every row has an id, or none has one (the usual cases)
        ids = list(map(_topic_id, rows))
        if all(ids):
            parts.update(map(_id_and_partition, rows))
        elif ids.count(None) == len(ids):
            parts.update(map(_name_and_partition, rows))
        else:
            for p in rows:
                parts.add((p.topic_id or p.topic, p.partition))
        added = len(parts) - before
        return added, _forget(s, ex, remember=False)

    def _apply_unknown_start(self, s: TrackedSession, ex: Exchange, client: TrackedClient | None) -> tuple[int, int]:
        """_apply for a session alive before the capture, whose partitions at the start are unknown: a partition
        first seen may have been cached since its creation (Kafka 'updates' it), so it is called added only when
        the capture shows it new: forgotten earlier in the capture, fetched by the same client from another
        broker in the capture (its leader moved here), or with nothing fetched yet (offset 0, no last fetched
        epoch), which a client only sends for a partition it starts fetching."""
        parts, gone = _own_parts(s), s.forgotten_keys
        added = 0
        for p in ex.request_partitions:
            k = (p.topic_id or p.topic, p.partition)
            if k not in parts:
                parts.add(k)
                if ((gone is not None and k in gone) or (p.fetch_offset == 0 and p.last_fetched_epoch == -1)
                        or self._fetched_elsewhere(client, s, k)):
                    added += 1
        return added, _forget(s, ex, remember=True)

    def _fetched_elsewhere(self, client: TrackedClient | None, s: TrackedSession, k: tuple) -> bool:
        """Did ``client`` fetch partition ``k`` in a session on another broker, as far as the capture shows?"""
        if client is None:
            return False
        for broker, sid in client.sessions:
            if broker == s.broker:
                continue
            other = self.brokers[broker].sessions.get(sid)
            if other is not None and (k in other.parts or (other.forgotten_keys and k in other.forgotten_keys)):
                return True
        return False

    @staticmethod
    def _step(s: TrackedSession, ex: Exchange, kind: str, added: int, forgotten: int) -> None:
        if count_steps(s.steps) >= MAX_STEPS:
            s.dropped += 1
            return
        s.steps = append_step(s.steps, kind, ex.session_epoch if ex.session_epoch is not None else FINAL_EPOCH,
                              ex.file, ex.request_frame, ex.response_frame, ex.ts, ex.conn, ex.error_code,
                              ex.partitions, added, forgotten, ex.response_partition_count)

    @staticmethod
    def _end(s: TrackedSession, end: str, reason: str, frame, ts) -> None:
        s.end, s.end_reason, s.end_frame, s.end_ts = end, reason, frame, ts

    def fed(self) -> None:
        """Nothing more will be fed: the sessions' recent requests (evidence for the findings made while feeding),
        and the last successful one of every session that never got a 70, are dropped before the findings'
        cache replay adds its own state (memory)."""
        for s in self.sessions:
            if s.error_ts is None:  # its last success is read again only for a session that got a 70 (causes)
                s.last_success = None
            # (not cleared: an empty list per session is 56 bytes of a storm's peak; a tuple, so that feeding
            # after this fails loudly)
            s.recent = cast(list, _NO_RECENT)

    def connection_ended(self, conn: int) -> str | None:
        """A closed connection (decoder.DecodeRun.ended) with nothing in flight can never be one of a lost
        broker's cut connections (connections.broker_losses), but its answers still tell when the broker was
        alive: it moves to the broker's closed connections, as those (memory). Returns the connection's broker
        (None: no exchange of it was fed)."""
        for broker in self.brokers.values():
            cs = broker.connections.get(conn)
            if cs is not None:
                if not cs.in_flight:
                    del broker.connections[conn]
                    broker.closed.add(cs)
                return broker.broker
        return None

    # -- results -------------------------------------------------------------------------------------------
    def client_summaries(self) -> list[ClientSummary]:
        return [c.summary() for c in self.clients.values()]

    def broker_summaries(self) -> list[BrokerSummary]:
        by_broker: dict[str, list[TrackedSession]] = {b: [] for b in self.brokers}
        for s in self.sessions:
            by_broker[s.broker].append(s)
        return [b.summary(by_broker[name]) for name, b in self.brokers.items()]

    def session_lives(self) -> list[SessionLife]:
        return [s.life() for s in self.sessions]


_topic_id = attrgetter("topic_id")
_id_and_partition = attrgetter("topic_id", "partition")
_name_and_partition = attrgetter("topic", "partition")


_NO_RECENT: tuple[()] = ()  # a session's recent requests once nothing more is fed


def _own_parts(s: TrackedSession) -> set:
    """The session's partitions as its own set (a shared frozenset is copied the first time it changes)."""
    parts = s.parts
    if isinstance(parts, frozenset):
        parts = s.parts = set(parts)
    return parts


def _forget(s: TrackedSession, ex: Exchange, remember: bool) -> int:
    """Drops the request's forgotten partitions from the session; how many it held. ``remember``: keep every
    forgotten key (a session alive before the capture, whose later re-adds are then known to be new)."""
    forgotten = 0
    if ex.forgotten_partitions:
        parts = _own_parts(s)
        for p in ex.forgotten_partitions:
            k = (p.topic_id or p.topic, p.partition)
            if remember:
                if s.forgotten_keys is None:
                    s.forgotten_keys = set()
                s.forgotten_keys.add(k)
            if k in parts:
                parts.discard(k)
                forgotten += 1
    if len(s.parts) > s.max_parts:
        s.max_parts = len(s.parts)
    return forgotten


def session_left(s: TrackedSession, ex: Exchange) -> int | None:
    """Partitions the session still holds after ``ex`` (None when unknown): a session seen from its creation
    holds what the capture shows; one alive before the capture still holds one if the request forgot none,
    since Kafka never keeps an empty session."""
    if not s.before_capture:
        return len(s.parts)
    return None if ex.forgotten_partitions else 1


def _privileged(ex: Exchange) -> bool:
    """A follower's fetch (replica id >= 0): Kafka gives its session priority in the cache."""
    return ex.replica_id is not None and ex.replica_id >= 0


def _remember(recent: list[SentRequest], sent: SentRequest) -> None:
    recent.append(sent)
    if len(recent) > RECENT:
        del recent[0]


_new_sent = fast_constructor(SentRequest)  # one per request (fetchtool._fast)


def _sent(ex: Exchange, epoch: int) -> SentRequest:
    return _new_sent(epoch, ex.file, ex.request_frame, ex.response_frame, ex.ts, ex.response_ts, ex.conn,
                       ex.error_code)  # fmt: skip


__all__ = ["SessionTracker", "Observation", "TrackedSession", "TrackedClient", "TrackedBroker", "SentRequest",
           "FETCH", "host_of"]  # fmt: skip
