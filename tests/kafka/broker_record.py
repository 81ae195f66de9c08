"""Apache Kafka's own record of a run, read back into frozen dataclasses: the reference fetchtool is held to.

Two files per broker node (tools/kafka_peer.py wires the loggers):

  sessions.log  org.apache.kafka.server.FetchSessionCacheShard (sessions created, refused, evicted) and
                org.apache.kafka.server.FetchManager (full and incremental contexts, session errors).
                The strings are those of Kafka 4.3.1 (FetchSessionCacheShard.java, FetchManager.java).
  requests.log  kafka.request.logger: `[ts] Completed request:{json}` per request, with its response.

Nothing here looks at a capture or at fetchtool: every number comes from the broker's log lines. Times are the
log's local wall clock (the test machines run in UTC), as POSIX seconds.

Two facts of Kafka's logging that matter when comparing with the wire:
  * "Created fetch session" is logged when the response is built (after the long poll), not when the request
    arrives; its `epoch=1` is the epoch the client will send next.
  * "Created a new incremental FetchContext for session id X, epoch E" logs the session's epoch AFTER the
    request bumped it: the request carried E - 1 (`IncrementalContext.request_epoch`).
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
FETCH_SESSION_TOPIC_ID_ERROR = 106

_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d),(\d{3})\] (?:(TRACE|DEBUG|INFO|WARN|ERROR) )?(.*)$")

# FetchSessionCacheShard (logger prefix "[Shard N] ")
_CREATED = re.compile(
    r"^\[Shard (\d+)\] Created fetch session FetchSession\(id=(-?\d+), privileged=(true|false), "
    r"partitionMap\.size=(\d+), usesTopicIds=(true|false), creationMs=(\d+), lastUsedMs=(\d+), epoch=(-?\d+)\)")
_REFUSED = re.compile(r"^\[Shard (\d+)\] No fetch session created for privileged=(true|false), size=(\d+)\.")
_STALE = re.compile(r"^\[Shard (\d+)\] Evicting stale FetchSession (-?\d+)\.")
_KEY = r"EvictableKey\[privileged=(true|false), size=(\d+), id=(-?\d+)\]"
_BY_SIZE = re.compile(rf"^\[Shard (\d+)\] Evicting {_KEY} with {_KEY}\.")
# FetchManager
_FULL = re.compile(r"^Created a new full FetchContext with (\d+) partition\(s\)\.( Removed fetch session (-?\d+)\.)?"
                   r"( Will not try to create a new session\.)?")
_INCREMENTAL = re.compile(
    r"^Created a new incremental FetchContext for session id (-?\d+), epoch (-?\d+): added (\d+) partition\(s\), "
    r"updated (\d+) partition\(s\), removed (\d+) partition\(s\)")
_EMPTIED = re.compile(r"^Created a new sessionless FetchContext and closing session id (-?\d+), epoch (-?\d+): "
                      r"after removing (\d+) partition\(s\), there are no more partitions left\.")
_NOT_FOUND = re.compile(r"^Session error for (-?\d+): no such session ID found\.")
_BAD_EPOCH = re.compile(r"^Session error for (-?\d+): expected epoch (-?\d+), but got (-?\d+) instead\.")
_TOPIC_ID = re.compile(r"^Session error for (-?\d+): expected  (to use topic IDs|to not use topic IDs), "
                       r"but request version (\d+) means that we can not\.")
_COMPLETED = "Completed request:"


def _ts(date: str, millis: str) -> float:
    return datetime.strptime(date, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp() + int(millis) / 1000


def _bool(text: str) -> bool:
    return text == "true"


def next_epoch(epoch: int) -> int:
    """FetchMetadata.nextEpoch: 0 -> 1, Integer.MAX_VALUE wraps to 1 (never to 0 or -1)."""
    return 1 if epoch in (0, 2**31 - 1) else epoch + 1


def previous_epoch(epoch: int) -> int:
    """The epoch a request carried, from the epoch Kafka logged after bumping it (inverse of next_epoch, > 0)."""
    return epoch - 1 if epoch > 1 else 2**31 - 1


def topic_id_text(kafka_uuid: str) -> str:
    """Kafka's Uuid text (base64url, unpadded, as in the request log) -> the usual 8-4-4-4-12 hex form."""
    return str(uuid.UUID(bytes=base64.urlsafe_b64decode(kafka_uuid + "=" * (-len(kafka_uuid) % 4))))


# ---------------------------------------------------------------------------------------------------------------
# sessions.log


@dataclass(frozen=True)
class LogLine:
    node: str  # which broker node's log ("" when there is one)
    line: int  # 1-based line number in its file
    ts: float


@dataclass(frozen=True)
class SessionCreated(LogLine):
    shard: int
    session_id: int
    privileged: bool
    size: int  # partitionMap.size: partitions cached by the new session
    uses_topic_ids: bool
    creation_ms: int
    epoch: int  # the epoch the client must send next (1)


@dataclass(frozen=True)
class CreationRefused(LogLine):
    """No fetch session created: the shard was full and nothing could be evicted (the response carries id 0)."""

    shard: int
    privileged: bool
    size: int


@dataclass(frozen=True)
class Eviction(LogLine):
    shard: int
    victim_id: int
    stale: bool  # "Evicting stale FetchSession" (idle past the eviction time); else evicted by a bigger session
    victim_privileged: bool | None  # from the EvictableKey (None for stale evictions)
    victim_size: int | None
    evictor_size: int | None  # the new session's size in its EvictableKey
    evictor: SessionCreated | None  # the next creation in the same shard (the session that took the slot)


@dataclass(frozen=True)
class FullContext(LogLine):
    """A full Fetch request: `partitions` in the request; it closed `removed_session` if it named one."""

    partitions: int
    removed_session: int | None
    sessionless: bool  # epoch -1: "Will not try to create a new session."


@dataclass(frozen=True)
class IncrementalContext(LogLine):
    session_id: int
    epoch: int  # the session's epoch after this request (Kafka logs it after the bump)
    added: int
    updated: int
    removed: int

    @property
    def request_epoch(self) -> int:
        return previous_epoch(self.epoch)


@dataclass(frozen=True)
class SessionEmptied(LogLine):
    """An incremental request that forgot every partition: Kafka closes the session."""

    session_id: int
    epoch: int
    removed: int


@dataclass(frozen=True)
class SessionError(LogLine):
    session_id: int
    code: int  # 70, 71 or 106
    expected_epoch: int | None = None  # 71
    got_epoch: int | None = None  # 71
    request_version: int | None = None  # 106


@dataclass
class SessionsLog:
    node: str = ""
    created: list[SessionCreated] = field(default_factory=list)
    refused: list[CreationRefused] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    full: list[FullContext] = field(default_factory=list)
    incremental: list[IncrementalContext] = field(default_factory=list)
    emptied: list[SessionEmptied] = field(default_factory=list)
    errors: list[SessionError] = field(default_factory=list)
    unparsed: list[str] = field(default_factory=list)  # lines of the two loggers this parser does not know

    @property
    def closed_by_full(self) -> list[FullContext]:
        return [f for f in self.full if f.removed_session is not None]

    def created_by_id(self) -> dict[int, list[SessionCreated]]:
        out: dict[int, list[SessionCreated]] = {}
        for c in self.created:
            out.setdefault(c.session_id, []).append(c)
        return out

    def incremental_by_id(self) -> dict[int, list[IncrementalContext]]:
        out: dict[int, list[IncrementalContext]] = {}
        for c in self.incremental:
            out.setdefault(c.session_id, []).append(c)
        return out


def open_text(path: str | Path) -> Iterator[str]:
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as fh:  # type: ignore[operator]
        yield from fh


def parse_sessions_log(lines: Iterable[str], node: str = "") -> SessionsLog:
    log = SessionsLog(node=node)
    pending: list[tuple[dict, int]] = []  # (Eviction fields, shard) waiting for their evictor's creation
    for number, raw in enumerate(lines, 1):
        m = _LINE.match(raw.rstrip("\n"))
        if not m:
            continue  # a continuation line (none expected from these loggers)
        ts, text = _ts(m[1], m[2]), m[4]
        base = {"node": node, "line": number, "ts": ts}
        if c := _CREATED.match(text):
            created = SessionCreated(**base, shard=int(c[1]), session_id=int(c[2]), privileged=_bool(c[3]),
                                     size=int(c[4]), uses_topic_ids=_bool(c[5]), creation_ms=int(c[6]),
                                     epoch=int(c[8]))
            log.created.append(created)
            still = []
            for fields, shard in pending:
                if shard == created.shard:
                    log.evictions.append(Eviction(**fields, evictor=created))
                else:
                    still.append((fields, shard))
            pending = still
        elif c := _REFUSED.match(text):
            log.refused.append(CreationRefused(**base, shard=int(c[1]), privileged=_bool(c[2]), size=int(c[3])))
        elif c := _STALE.match(text):
            pending.append(({**base, "shard": int(c[1]), "victim_id": int(c[2]), "stale": True,
                             "victim_privileged": None, "victim_size": None, "evictor_size": None}, int(c[1])))
        elif c := _BY_SIZE.match(text):
            pending.append(({**base, "shard": int(c[1]), "victim_id": int(c[4]), "stale": False,
                             "victim_privileged": _bool(c[2]), "victim_size": int(c[3]),
                             "evictor_size": int(c[6])}, int(c[1])))
        elif c := _FULL.match(text):
            log.full.append(FullContext(**base, partitions=int(c[1]),
                                        removed_session=int(c[3]) if c[3] is not None else None,
                                        sessionless=c[4] is not None))
        elif c := _INCREMENTAL.match(text):
            log.incremental.append(IncrementalContext(**base, session_id=int(c[1]), epoch=int(c[2]),
                                                      added=int(c[3]), updated=int(c[4]), removed=int(c[5])))
        elif c := _EMPTIED.match(text):
            log.emptied.append(SessionEmptied(**base, session_id=int(c[1]), epoch=int(c[2]), removed=int(c[3])))
        elif c := _NOT_FOUND.match(text):
            log.errors.append(SessionError(**base, session_id=int(c[1]), code=FETCH_SESSION_ID_NOT_FOUND))
        elif c := _BAD_EPOCH.match(text):
            log.errors.append(SessionError(**base, session_id=int(c[1]), code=INVALID_FETCH_SESSION_EPOCH,
                                           expected_epoch=int(c[2]), got_epoch=int(c[3])))
        elif c := _TOPIC_ID.match(text):
            log.errors.append(SessionError(**base, session_id=int(c[1]), code=FETCH_SESSION_TOPIC_ID_ERROR,
                                           request_version=int(c[3])))
        elif any(s in text for s in ("There are no cache entries to evict.", "No evictable entries found.",
                                     "Can't evict ")):
            continue  # an eviction attempt that failed; the refusal line that follows is what counts
        elif "FetchSessionCacheShard" in text or "FetchManager" in text:
            log.unparsed.append(raw.rstrip("\n"))
    # An eviction whose creation is not in the log (the log was cut there) keeps evictor None.
    log.evictions.extend(Eviction(**fields, evictor=None) for fields, _ in pending)
    log.evictions.sort(key=lambda e: e.line)
    return log


def read_sessions_log(path: str | Path, node: str = "") -> SessionsLog:
    return parse_sessions_log(open_text(path), node)


# ---------------------------------------------------------------------------------------------------------------
# requests.log (Fetch only)


@dataclass(frozen=True)
class LoggedPartition:
    topic: str  # the topic name (v0-v12) or topic id in 8-4-4-4-12 form (v13+)
    partition: int


@dataclass(frozen=True)
class FetchPartition(LoggedPartition):
    fetch_offset: int
    partition_max_bytes: int
    log_start_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int


@dataclass(frozen=True)
class ResponsePartition(LoggedPartition):
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    preferred_read_replica: int
    records_bytes: int  # recordsSizeInBytes: what Kafka logs instead of the records


@dataclass(frozen=True)
class FetchRecord:
    """One Fetch request as kafka.request.logger recorded it, with its response."""

    node: str
    line: int
    ts: float  # when the response was sent ("Completed request")
    total_ms: float  # totalTimeMs: the request arrived ts - total_ms / 1000
    broker: str  # ip:port of the listener ("connection" field, first half)
    client: str  # ip:port of the client
    listener: str
    api_version: int
    correlation_id: int
    client_id: str | None
    client_software: str | None  # clientInformation "name/version" (None when Kafka says unknown)
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int | None  # v3+
    isolation_level: int | None  # v4+
    session_id: int | None  # v7+
    session_epoch: int | None
    rack_id: str | None  # v11+
    partitions: tuple[FetchPartition, ...]
    forgotten: tuple[LoggedPartition, ...]
    throttle_time_ms: int | None
    error_code: int | None  # top-level error (v7+)
    response_session_id: int | None
    response_partitions: tuple[ResponsePartition, ...]

    @property
    def received_ts(self) -> float:
        return self.ts - self.total_ms / 1000

    @property
    def partition_errors(self) -> int:
        return sum(1 for p in self.response_partitions if p.error_code != 0)

    @property
    def records_bytes(self) -> int:
        return sum(p.records_bytes for p in self.response_partitions)

    @property
    def key(self) -> tuple[str, int]:
        return (self.client, self.correlation_id)

    @property
    def is_follower(self) -> bool:
        return self.replica_id >= 0


def _topic(entry: dict) -> str:
    if "topicId" in entry and entry["topicId"] not in (None, "AAAAAAAAAAAAAAAAAAAAAA"):
        return topic_id_text(entry["topicId"])
    return entry.get("topic") or entry.get("topicName") or ""


def _connection(text: str) -> tuple[str, str]:
    """'brokerip:port-clientip:port-processor-index' -> (broker, client)."""
    addresses = text.rsplit("-", 2)[0]
    broker, client = addresses.split("-", 1)
    return broker, client


def fetch_record(obj: dict, node: str = "", line: int = 0, ts: float = 0.0) -> FetchRecord:
    header, req, resp = obj["requestHeader"], obj["request"], obj.get("response") or {}
    version = header["requestApiVersion"]
    broker, client = _connection(obj["connection"])
    info = obj.get("clientInformation") or {}
    software = None
    if info.get("softwareName") not in (None, "unknown"):
        software = f"{info['softwareName']}/{info.get('softwareVersion')}"
    replica = req.get("replicaId")
    if replica is None:
        replica = (req.get("replicaState") or {}).get("replicaId", -1)
    partitions = tuple(
        FetchPartition(topic=_topic(t), partition=p["partition"], fetch_offset=p["fetchOffset"],
                       partition_max_bytes=p["partitionMaxBytes"], log_start_offset=p.get("logStartOffset", -1),
                       current_leader_epoch=p.get("currentLeaderEpoch", -1),
                       last_fetched_epoch=p.get("lastFetchedEpoch", -1))
        for t in req.get("topics", []) for p in t["partitions"])
    forgotten = tuple(LoggedPartition(topic=_topic(t), partition=p)
                      for t in req.get("forgottenTopicsData") or [] for p in t["partitions"])
    responses = tuple(
        ResponsePartition(topic=_topic(t), partition=p["partitionIndex"], error_code=p["errorCode"],
                          high_watermark=p["highWatermark"], last_stable_offset=p.get("lastStableOffset", -1),
                          log_start_offset=p.get("logStartOffset", -1),
                          preferred_read_replica=p.get("preferredReadReplica", -1),
                          records_bytes=p.get("recordsSizeInBytes", 0))
        for t in resp.get("responses", []) for p in t["partitions"])
    return FetchRecord(
        node=node, line=line, ts=ts, total_ms=float(obj.get("totalTimeMs", 0.0)), broker=broker, client=client,
        listener=obj.get("listener", ""), api_version=version, correlation_id=header["correlationId"],
        client_id=header.get("clientId"), client_software=software, replica_id=replica,
        max_wait_ms=req["maxWaitMs"], min_bytes=req["minBytes"], max_bytes=req.get("maxBytes"),
        isolation_level=req.get("isolationLevel"), session_id=req.get("sessionId"),
        session_epoch=req.get("sessionEpoch"), rack_id=req.get("rackId"), partitions=partitions,
        forgotten=forgotten, throttle_time_ms=resp.get("throttleTimeMs"), error_code=resp.get("errorCode"),
        response_session_id=resp.get("sessionId"), response_partitions=responses)


def parse_requests_log(lines: Iterable[str], node: str = "") -> list[FetchRecord]:
    """The FETCH lines of a request log (every other API is skipped)."""
    out = []
    for number, raw in enumerate(lines, 1):
        if '"requestApiKeyName":"FETCH"' not in raw:
            continue
        m = _LINE.match(raw.rstrip("\n"))
        if not m or not m[4].startswith(_COMPLETED):
            continue
        obj = json.loads(m[4][len(_COMPLETED):])
        if obj["requestHeader"]["requestApiKey"] != 1:
            continue
        out.append(fetch_record(obj, node, number, _ts(m[1], m[2])))
    return out


def read_requests_log(path: str | Path, node: str = "") -> list[FetchRecord]:
    return parse_requests_log(open_text(path), node)


# ---------------------------------------------------------------------------------------------------------------
# Both files of every node of a run


@dataclass
class BrokerRecord:
    sessions: dict[str, SessionsLog]  # node -> its sessions.log
    fetches: list[FetchRecord]  # every node's Fetch requests, in log order per node

    @property
    def all_created(self) -> list[SessionCreated]:
        return [c for log in self.sessions.values() for c in log.created]

    @property
    def all_evictions(self) -> list[Eviction]:
        return [e for log in self.sessions.values() for e in log.evictions]

    @property
    def all_incremental(self) -> list[IncrementalContext]:
        return [c for log in self.sessions.values() for c in log.incremental]

    @property
    def all_errors(self) -> list[SessionError]:
        return [e for log in self.sessions.values() for e in log.errors]

    def owners(self) -> dict[tuple[str, int], FetchRecord]:
        """(broker, session id) -> the logged Fetch whose response created it: a full request (epoch 0) answered
        with a new session id. Kafka's own pairing of a session and a client connection."""
        out: dict[tuple[str, int], FetchRecord] = {}
        for f in self.fetches:
            if (f.session_epoch == 0 and f.response_session_id and f.error_code == 0
                    and (f.broker, f.response_session_id) not in out):
                out[(f.broker, f.response_session_id)] = f
        return out

    def node_of_broker(self) -> dict[str, str]:
        """broker ip:port -> node label, from the Fetch lines each node's request log holds."""
        return {f.broker: f.node for f in self.fetches}


def load(sessions_logs: dict[str, Path], requests_logs: dict[str, Path]) -> BrokerRecord:
    return BrokerRecord(
        sessions={node: read_sessions_log(p, node) for node, p in sessions_logs.items()},
        fetches=[f for node, p in requests_logs.items() for f in read_requests_log(p, node)],
    )


# ---------------------------------------------------------------------------------------------------------------
# A committed capture of captures/kafka/ with the broker's record beside it


KILL_UNSURE_S = 1.0  # requests a SIGKILL may have cut or answered without a log line: sent within this before it


@dataclass
class RecordedRun:
    """captures/kafka/NAME.pcap, its NAME.record.json (ports, times, faults) and Kafka's logs of every node."""

    pcap: Path
    meta: dict  # NAME.record.json
    record: BrokerRecord
    node_broker: dict[str, str]  # node label ("node1") -> the node's client listener "127.0.0.1:port"
    node_ports: dict[str, list[int]]  # node label -> every port of the node (client and controller)

    @property
    def name(self) -> str:
        return self.meta["name"]

    @property
    def window(self) -> tuple[float, float]:
        """First and last packet of the pcap (tcpdump may stop writing before record.json's capture stop)."""
        if not hasattr(self, "_window"):
            self._window = pcap_time_span(self.pcap)
        return self._window

    @property
    def cache_slots(self) -> int:
        return self.meta["cluster"]["cache_slots"]

    @property
    def cache_shards(self) -> int:
        return self.meta["cluster"].get("cache_shards", 8)

    def events(self, pattern: str) -> list[dict]:
        return [e for e in self.meta.get("events", []) if re.search(pattern, e["event"])]

    def node_deaths(self) -> list[tuple[str, float, float | None]]:
        """(node label, SIGKILL time, time the node accepted again or None) for every killed node."""
        out = []
        for kill in self.events(r"^SIGKILL node \d+"):
            nid = kill.get("node_id") or int(kill["event"].split()[-1])
            back = [e["time"] for e in self.events(rf"^node {nid} accepting") if e["time"] > kill["time"]]
            out.append((f"node{nid}", kill["time"], min(back) if back else None))
        return out

    def unlogged_at_kill(self) -> set[tuple[str, int, int]]:
        """(broker, session id, request epoch) of the incremental contexts a SIGKILLed node logged in the last
        KILL_UNSURE_S before its kill whose request has no request-log line. Kafka writes "Completed request"
        only after the response has left, so such a request was either cut in flight or answered with its line
        lost to the kill: the capture may show either, and Kafka's record cannot tell which."""
        logged = {(f.broker, f.session_id, f.session_epoch) for f in self.record.fetches}
        out = set()
        for node, killed, _back in self.node_deaths():
            broker = self.node_broker[node]
            for c in self.record.sessions[node].incremental:
                key = (broker, c.session_id, c.request_epoch)
                if killed - KILL_UNSURE_S <= c.ts <= killed and key not in logged:
                    out.add(key)
        return out

    def answered_near_kill(self, broker: str, response_ts: float | None) -> bool:
        """A response from `broker` the capture shows within KILL_UNSURE_S before its node was SIGKILLed: its
        request-log line may be lost to the kill (see unlogged_at_kill)."""
        node = self.session_node(broker)
        return response_ts is not None and any(
            n == node and killed - KILL_UNSURE_S <= response_ts and (back is None or response_ts < back)
            and response_ts <= killed + KILL_UNSURE_S for n, killed, back in self.node_deaths())

    def session_node(self, broker: str) -> str | None:
        return next((n for n, b in self.node_broker.items() if b == broker), None)

    def _cache_lives(self, node: str) -> Iterator[tuple[float, set[int]]]:
        """The node's cache over time, replaying its sessions.log: (time, the live session ids just after) per
        event: a creation adds one; a session removed by a full request, emptied by an incremental one, or
        evicted leaves; a SIGKILLed node's cache is empty when it comes back."""
        log = self.record.sessions[node]
        events: list[tuple[float, int, str, int]] = [(c.ts, c.line, "+", c.session_id) for c in log.created]
        events += [(f.ts, f.line, "-", f.removed_session) for f in log.closed_by_full]
        events += [(e.ts, e.line, "-", e.session_id) for e in log.emptied]
        events += [(e.ts, e.line, "-", e.victim_id) for e in log.evictions]
        events += [(t, -1, "kill", 0) for n, t, _ in self.node_deaths() if n == node]
        live: set[int] = set()
        for ts, _line, op, sid in sorted(events):
            if op == "+":
                live.add(sid)
            elif op == "-":
                live.discard(sid)
            else:
                live.clear()
            yield ts, live

    def live_sessions_peak(self, node: str, since: float | None = None, until: float | None = None) -> int:
        """The most sessions the node's cache held at once (_cache_lives). Only moments between `since` and
        `until` count (the cache may already hold sessions at `since`)."""
        return max((len(live) for ts, live in self._cache_lives(node)
                    if (since is None or ts >= since) and (until is None or ts <= until)), default=0)

    def session_held(self, node: str, session_id: int, t: float) -> bool:
        """Whether the node's cache held `session_id` at time t (_cache_lives)."""
        held = False
        for ts, live in self._cache_lives(node):
            if ts >= t:
                break
            held = session_id in live
        return held

    @property
    def sessions(self) -> dict[str, SessionsLog]:
        return self.record.sessions


def load_run(pcap: str | Path) -> RecordedRun:
    pcap = Path(pcap)
    stem = pcap.name.split(".pcap")[0]
    meta = json.loads((pcap.parent / f"{stem}.record.json").read_text())
    sessions_logs, requests_logs, node_broker, node_ports = {}, {}, {}, {}
    for n in meta["nodes"]:
        label = f"node{n['node_id']}"
        node_broker[label] = f"127.0.0.1:{n['port']}"
        node_ports[label] = [n["port"]] + ([n["controller_port"]] if n.get("controller_port") else [])
        for key, into in (("sessions_log", sessions_logs), ("requests_log", requests_logs)):
            name = n.get(key)
            if name and (pcap.parent / name).exists():
                into[label] = pcap.parent / name
            elif name and (pcap.parent / (name + ".gz")).exists():
                into[label] = pcap.parent / (name + ".gz")
    return RecordedRun(pcap, meta, load(sessions_logs, requests_logs), node_broker, node_ports)


def pcap_time_span(path: str | Path) -> tuple[float, float]:
    """First and last packet timestamps of a classic pcap or pcapng file (gzip accepted), read from the file
    format's record headers (not through fetchtool)."""
    import struct

    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    magic = raw[:4]
    times: list[float] = []
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        e = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
        nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
        off = 24
        while off + 16 <= len(raw):
            sec, frac, incl, _ = struct.unpack_from(e + "IIII", raw, off)
            times.append(sec + frac / (1e9 if nano else 1e6))
            off += 16 + incl
    elif magic == b"\x0a\x0d\x0d\x0a":
        off, e, resol, iface = 0, "<", {}, 0
        while off + 12 <= len(raw):
            btype = struct.unpack_from("<I", raw, off)[0]
            if btype == 0x0A0D0D0A:
                e = "<" if raw[off + 8:off + 12] == b"\x4d\x3c\x2b\x1a" else ">"
                iface = 0
            blen = struct.unpack_from(e + "I", raw, off + 4)[0]
            if btype == 1:
                resol[iface] = 1e6
                opt = off + 16
                while opt + 4 <= off + blen - 4:
                    code, olen = struct.unpack_from(e + "HH", raw, opt)
                    if code == 0:
                        break
                    if code == 9:
                        v = raw[opt + 4]
                        resol[iface] = 2 ** (v & 0x7F) if v & 0x80 else 10 ** v
                    opt += 4 + olen + (-olen % 4)
                iface += 1
            elif btype == 6:
                ifid, hi, lo = struct.unpack_from(e + "III", raw, off + 8)
                times.append(((hi << 32) | lo) / resol.get(ifid, 1e6))
            off += blen
    else:
        raise ValueError(f"{path}: not a pcap or pcapng file")
    return min(times), max(times)
