"""What an analysis produces: frozen records for findings, sessions, clients and brokers.

These are the objects the reports render and the `analyze --format json` contract (design.md) serialises.
Every record has `to_json()` giving exactly the JSON object of the contract (extra keys are extensions).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from fetchtool.printable import one_line

if TYPE_CHECKING:  # annotations only: model stays importable from everywhere (no cycles)
    from fetchtool.analysis.diagnosis.occupancy import Occupancy
    from fetchtool.analysis.shown import NeverUsed
    from fetchtool.analysis.tracking.timeline import Timeline

ERROR, WARNING, INFO = "error", "warning", "info"
SEVERITY_ORDER = {ERROR: 0, WARNING: 1, INFO: 2}

# Request kinds, as a support engineer would name them.
SESSIONLESS = "sessionless"  # (0, -1) or Fetch < v7: never creates a session
FULL = "full"  # (0, 0) or (id, 0) that did not get a session
FULL_CREATE = "full_create"  # a full request whose response created a session
INCREMENTAL = "incremental"  # (id, n > 0) (and the anomalous n <= -2)
CLOSE = "close"  # (id, -1): close the session, no new one
SNAPSHOT = "snapshot"  # FetchSnapshot (KIP-630)


def closes_a_session(session_id: int | None, epoch: int | None, named_before: int) -> bool:
    """Whether a request is a CLOSE, (id, -1): for a positive id only (Kafka's ids are; kafka-go sends (-1, -1)),
    and not the id a full request before it on the same connection named (``named_before``, 0: none). Kafka
    removed that session then and answers this (id, -1) as any sessionless fetch (franz-go, once refused a
    session, sends (its last id, -1) on every fetch). The tracker and the savings model classify by this rule."""
    return epoch == -1 and session_id is not None and session_id > 0 and session_id != named_before

JSON_LIST = 1000  # a client's addresses and sessions listed in JSON; the rest counted

# How a session ended.
ALIVE, CLOSED, EVICTED, LOST = "alive", "closed", "evicted", "lost"


@dataclass(frozen=True, slots=True)
class Finding:
    code: str
    severity: str
    cause: str | None
    client: str | None
    client_id: str | None
    broker: str | None
    session_id: int | None
    epoch: int | None
    file: str | None
    request_frame: int | None
    response_frame: int | None
    ts: float | None
    message: str
    advice: str
    # Extensions: aggregated findings (one per client/broker rather than one per fetch) count their
    # occurrences and list the first frames, so the engineer can jump to them in Wireshark.
    count: int = 1
    frames: tuple[int, ...] = ()
    known_bugs: tuple[str, ...] = ()  # published bugs of this client's software that produce this pattern

    def to_json(self) -> dict:
        d = asdict(self)
        d["frames"] = list(self.frames)
        d["known_bugs"] = list(self.known_bugs)
        return d

    @property
    def sort_key(self) -> tuple:
        return (SEVERITY_ORDER.get(self.severity, 9), self.ts if self.ts is not None else float("inf"), self.code)


@dataclass(frozen=True, slots=True)
class EpochStep:
    """One request of a session and what the broker did with it."""

    kind: str
    epoch: int  # the epoch the request carried
    file: str
    request_frame: int | None
    response_frame: int | None
    ts: float | None
    conn: int
    error_code: int | None  # None: response not captured
    sent: int  # partitions in the request
    added: int  # partitions new to the session
    forgotten: int
    returned: int | None  # partitions in the response

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class TrafficSummary:
    """Fetch traffic of a client, broker or session: how fast it fetches, how long answers take, how many came
    back empty, and whether empty answers were held for MaxWaitMs (fetchtool.analysis.tracking.traffic)."""

    fetches: int
    fetches_per_s: float | None  # (fetches - 1) over the time from the first request to the last
    response_ms: dict  # {"responses", "p50", "p99", "relative_error"}: response_ts - ts, log-bucket sketch
    empty_responses: int  # no records, no error
    empty_share: float | None  # of the responses
    max_wait_checked: int  # empty, error-free, unthrottled answers to MaxWait > 0 and MinBytes >= 1
    max_wait_early: int  # of those, answered in under half of MaxWait
    max_wait_honoured: bool | None  # None: fewer than 3 checked

    def to_json(self) -> dict:
        return {
            "fetches": self.fetches, "fetches_per_s": self.fetches_per_s, "response_ms": dict(self.response_ms),
            "empty_responses": self.empty_responses, "empty_share": self.empty_share,
            "max_wait": {"checked": self.max_wait_checked, "early": self.max_wait_early,
                         "honoured": self.max_wait_honoured},
        }  # fmt: skip


@dataclass(frozen=True, slots=True)
class PartitionErrorRow:
    """One error code on one partition, as one client got it from one broker."""

    client: str  # "ip:port" of the first response that carried it
    client_id: str | None
    host: str
    broker: str
    topic: str | None
    topic_id: str | None
    partition: int
    error_code: int
    error: str  # Kafka's name
    count: int
    file: str
    first_request_frame: int | None
    first_response_frame: int | None
    first_ts: float | None
    last_ts: float | None
    recovered: bool  # a later response from this broker to this client had this partition without error
    frames: tuple[int, ...] = ()  # response frames of the first occurrences

    @property
    def partition_name(self) -> str:
        return f"{self.topic or self.topic_id or '?'}-{self.partition}"

    def to_json(self) -> dict:
        d = asdict(self)
        d["frames"] = list(self.frames)
        return d


def owner(client_id: str | None, client: str | None, replica_id: int | None) -> str:
    """A session's holder, as a support engineer names it: client id@address, and a follower's replica id."""
    who = f"{client_id or '?'}@{client}"
    return who + (f" (follower, replica {replica_id})" if replica_id is not None and replica_id >= 0 else "")


@dataclass(frozen=True, slots=True)
class SessionLife:
    """One broker session from creation (or first sight) to its end, with the frames that show it."""

    broker: str
    session_id: int
    client: str | None  # "ip:port" of the connection that created (or first used) it
    client_id: str | None
    file: str
    created_request_frame: int | None  # the full request that created it (None: alive before the capture)
    created_response_frame: int | None
    created_ts: float | None
    created_version: int | None
    started_before_capture: bool
    first_partitions: int  # partitions in the creating request (or first request seen)
    partitions: int  # partitions in the session at its end
    max_partitions: int
    incremental_requests: int
    errors: int
    last_epoch: int | None  # last epoch the broker accepted
    end: str  # alive | closed | evicted | lost
    end_reason: str | None  # e.g. "closed by (id, -1) request", "evicted", "broker_restart"
    end_frame: int | None
    end_ts: float | None
    connections: int
    steps: tuple[EpochStep, ...] = ()
    steps_dropped: int = 0  # steps beyond the per-session cap (memory bound)
    replica_id: int | None = None  # a follower's (>= 0): Kafka gives its session priority in the cache
    traffic: TrafficSummary | None = None  # extension: response times and rates of this session's fetches

    @property
    def privileged(self) -> bool:
        """A follower's session: Kafka's cache evicts it last (FetchSessionCacheShard's EvictableKey order)."""
        return self.replica_id is not None and self.replica_id >= 0

    @property
    def owner(self) -> str:
        """Who holds it, as a support engineer names it: client id@address, and a follower's replica id."""
        return owner(self.client_id, self.client, self.replica_id)

    def to_json(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in ("steps", "traffic")}
        d["privileged"] = self.privileged
        if self.traffic is not None:
            d["traffic"] = self.traffic.to_json()
        return d


@dataclass(frozen=True, slots=True)
class ClientSummary:
    """A client: one client id from one host, over any number of connections and brokers."""

    client_id: str | None
    host: str
    addresses: tuple[str, ...]  # "ip:port" of each connection
    brokers: tuple[str, ...]
    software: tuple[str, ...]  # from ApiVersions v3+ (name/version)
    fetch_versions: dict[str, int]  # "v12" -> requests
    request_kinds: dict[str, int]
    exchanges: int
    sessions: tuple[tuple[str, int], ...]  # (broker, session id)
    errors: dict[str, int]  # top-level error code -> count
    traffic: TrafficSummary | None = None  # extension: response times and rates

    @property
    def label(self) -> str:
        return f"{one_line(self.client_id or '?')}@{self.host}"  # a newline in a client id forges no line

    def to_json(self) -> dict:
        # field by field, as asdict would (its deep copy walked every address and session of a client of
        # 100,000 connections, to keep JSON_LIST of them)
        d = {"client_id": self.client_id, "host": self.host, "addresses": list(self.addresses[:JSON_LIST]),
             "brokers": list(self.brokers), "software": list(self.software),
             "fetch_versions": dict(self.fetch_versions), "request_kinds": dict(self.request_kinds),
             "exchanges": self.exchanges,
             "sessions": [{"broker": b, "session_id": s} for b, s in self.sessions[:JSON_LIST]],
             "errors": dict(self.errors)}
        d["client"] = self.addresses[0] if self.addresses else self.host
        # a client of 100,000 connections: the first JSON_LIST of each list, and how many there are (extension)
        if len(self.addresses) > JSON_LIST:
            d["addresses_total"] = len(self.addresses)
        if len(self.sessions) > JSON_LIST:
            d["sessions_total"] = len(self.sessions)
        if self.traffic is not None:
            d["traffic"] = self.traffic.to_json()
        return d


@dataclass(frozen=True, slots=True)
class BrokerSummary:
    broker: str
    exchanges: int
    clients: int
    sessions_created: int
    sessions_seen: int
    max_live_sessions: int  # most sessions the capture shows in its cache at once (the shadow cache replay, analysis.shadow)
    refused_creations: int  # session-creating requests answered with session id 0
    errors: dict[str, int]
    traffic: TrafficSummary | None = None  # extension: response times and rates
    timeline: Timeline | None = None  # extension: fetches, errors, response times per time bucket
    cache_occupancy: Occupancy | None = None  # extension: live sessions over time in the shadow cache replay

    def to_json(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__
             if k not in ("traffic", "timeline", "cache_occupancy")}
        d["errors"] = dict(self.errors)
        if self.traffic is not None:
            d["traffic"] = self.traffic.to_json()
        d["timeline"] = None if self.timeline is None else self.timeline.to_json()
        d["cache_occupancy"] = None if self.cache_occupancy is None else self.cache_occupancy.to_json()
        return d


@dataclass(frozen=True, slots=True)
class CaptureSummary:
    files: tuple[str, ...]
    exchanges: int
    fetch_exchanges: int
    snapshot_exchanges: int
    first_ts: float | None
    last_ts: float | None
    request_bytes: int
    response_bytes: int
    records_bytes: int
    decode: dict = field(default_factory=dict)  # the decoder's report (packets, gaps, warnings) when known
    # extension: {"client": ..., "broker": ...} when --client / --broker kept the counts above to those exchanges
    filters: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        d = asdict(self)
        d["files"] = list(self.files)
        return d


@dataclass(frozen=True, slots=True)
class Analysis:
    """Everything `fetchtool analyze` reports."""

    capture: CaptureSummary
    brokers: tuple[BrokerSummary, ...]
    clients: tuple[ClientSummary, ...]
    sessions: tuple[SessionLife, ...]
    findings: tuple[Finding, ...]
    savings: dict
    partition_errors: tuple[PartitionErrorRow, ...] = ()  # extension
    # extension: the sessions in the capture when `sessions` lists only some of them (analysis.shown; None: all)
    sessions_total: int | None = None
    never_used: NeverUsed | None = None  # sessions nobody used, counted over all of them (analysis.shown)

    @property
    def sessions_more(self) -> int:
        """Sessions in the capture that `sessions` does not list."""
        return 0 if self.sessions_total is None else self.sessions_total - len(self.sessions)

    def to_json(self) -> dict:
        """The `analyze --format json` contract; each broker's partition errors are an extension of its object
        (`brokers[].partition_errors`), so the top-level keys stay the contract's."""
        by_broker: dict[str, list] = {}
        for p in self.partition_errors:
            by_broker.setdefault(p.broker, []).append(p.to_json())
        brokers = []
        for b in self.brokers:
            d = b.to_json()
            d["partition_errors"] = by_broker.get(b.broker, [])
            brokers.append(d)
        doc: dict[str, object] = {
            "capture": self.capture.to_json(),
            "brokers": brokers,
            "clients": [c.to_json() for c in self.clients],
            "sessions": [s.to_json() for s in self.sessions],
            "findings": [f.to_json() for f in self.findings],
            "savings": self.savings,
        }
        if self.sessions_more:  # a bounded list says so (extension keys, only then)
            doc["sessions_total"] = self.sessions_total
            doc["sessions_more"] = f"{self.sessions_more:,} more sessions, --sessions all to list them"
        return doc
