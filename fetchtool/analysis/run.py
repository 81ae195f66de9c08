"""The analysis pipeline: decode -> track sessions -> findings -> savings -> one Analysis object.

Streaming: exchanges are consumed one by one and dropped; only per-session and per-client state is kept.
`AnalysisPass` is the per-item step both engines run (analyze_items over everything, the Spark engine over one
broker's items); `analyze_items` is the core (any iterable of Exchange / OrphanResponse, e.g. from another
engine); `analyze_capture` adds the decoder at the edge.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from operator import attrgetter

from fetchtool.exchange import FETCH_SNAPSHOT, Exchange

from fetchtool.sessions.cache import DEFAULT_EVICTION_MS

from fetchtool.analysis.diagnosis import traffic as traffic_findings
from fetchtool.analysis.diagnosis.findings import FindingsEngine
from fetchtool.analysis.diagnosis.software_notes import annotate
from fetchtool.analysis.model import Analysis, BrokerSummary, CaptureSummary, Finding, SessionLife
from fetchtool.analysis.savings.estimator import SavingsEstimator
from fetchtool.analysis.tracking.partition_errors import PartitionErrors
from fetchtool.analysis.tracking.timeline import TimelineTracker
from fetchtool.analysis.tracking.tracker import Observation, SessionTracker, host_of
from fetchtool.analysis.tracking.traffic import TrafficTracker


_records_bytes = attrgetter("records_bytes")


class _Totals:
    __slots__ = ("exchanges", "fetch", "snapshot", "first_ts", "last_ts", "request_bytes", "response_bytes", "records")

    def __init__(self) -> None:
        self.exchanges = self.fetch = self.snapshot = 0
        self.first_ts = self.last_ts = None
        self.request_bytes = self.response_bytes = self.records = 0

    def add(self, ex: Exchange) -> None:
        self.exchanges += 1
        if ex.api_key == FETCH_SNAPSHOT:
            self.snapshot += 1
        else:
            self.fetch += 1
        for t in (ex.ts, ex.response_ts):
            if t is not None:
                if self.first_ts is None or t < self.first_ts:
                    self.first_ts = t
                if self.last_ts is None or t > self.last_ts:
                    self.last_ts = t
        self.request_bytes += ex.request_bytes or 0
        self.response_bytes += ex.response_bytes or 0
        if ex.response_partitions:
            self.records += sum(map(_records_bytes, ex.response_partitions))

    def merge(self, other: _Totals) -> None:
        """Add another part's totals (the Spark engine's per-broker parts)."""
        for name in ("exchanges", "fetch", "snapshot", "request_bytes", "response_bytes", "records"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for t in (other.first_ts, other.last_ts):
            if t is not None:
                self.first_ts = t if self.first_ts is None else min(self.first_ts, t)
                self.last_ts = t if self.last_ts is None else max(self.last_ts, t)

    def capture_summary(self, files, decode: dict) -> CaptureSummary:
        return CaptureSummary(
            files=tuple(files), exchanges=self.exchanges, fetch_exchanges=self.fetch, snapshot_exchanges=self.snapshot,
            first_ts=self.first_ts, last_ts=self.last_ts, request_bytes=self.request_bytes,
            response_bytes=self.response_bytes, records_bytes=self.records, decode=decode,
        )  # fmt: skip


def is_client(client: str | None, address: str | None, client_id: str | None) -> bool:
    """The --client rule: the client by client id, host or ip:port (no --client: every client)."""
    return not client or client == client_id or (address is not None and client in (address, host_of(address)))


def is_broker(broker: str | None, address: str | None) -> bool:
    """The --broker rule: the broker by ip:port or host (no --broker: every broker)."""
    return not broker or (address is not None and broker in (address, host_of(address)))


def concerns(ex: Exchange, client: str | None = None, broker: str | None = None) -> bool:
    """The --client / --broker rule for one exchange."""
    return is_client(client, ex.client, ex.client_id) and is_broker(broker, ex.broker)


def savings_filter(client: str | None, broker: str | None) -> Callable[[Exchange], bool] | None:
    """Which exchanges the savings estimate counts under --client / --broker (None: all of them). Sessions and
    findings are filtered after the analysis, since their causes may lie in other clients' traffic; savings are
    sums over exchanges, so they are filtered on the way in."""
    if not client and not broker:
        return None
    return lambda ex: concerns(ex, client, broker)


class AnalysisPass:
    """The analysis cores (SessionTracker, FindingsEngine, SavingsEstimator) fed one item at a time, in request
    order: analyze_items runs one over a whole run, the Spark engine one per broker
    (fetchtool.pipeline.spark_merge). ``savings_of``: see savings_filter; ``files``: files to list first."""

    __slots__ = ("tracker", "engine", "totals", "savings", "files", "traffic", "partition_errors", "timeline")

    def __init__(self, cache_slots: int | None = None, cache_shards: int | None = None,
                 savings_of: Callable[[Exchange], bool] | None = None, files: Iterable[str] = (),
                 eviction_ms: int = DEFAULT_EVICTION_MS) -> None:
        self.tracker = SessionTracker()
        self.engine = FindingsEngine(cache_slots, cache_shards, eviction_ms)
        self.totals = _Totals()
        self.savings = SavingsEstimator(only=savings_of)
        self.files: dict[str, None] = dict.fromkeys(files)  # the files that had exchanges, in request order
        self.traffic = TrafficTracker(traffic_findings.STORM_REFETCHES, self.tracker.brokers)
        self.partition_errors = PartitionErrors()
        self.timeline = TimelineTracker()

    def feed(self, it) -> Observation | None:
        """One Exchange (-> what it did: the tracker's Observation) or OrphanResponse (-> None)."""
        if isinstance(it, Exchange):
            self.files.setdefault(it.file, None)
            self.totals.add(it)
            obs = self.tracker.feed(it)
            self.engine.observe(obs)
            self.traffic.feed(it, obs)
            self.partition_errors.feed(it, obs.client.host)
            self.timeline.feed(it)
            self.savings.feed(it)
            return obs
        # OrphanResponse: a response whose request is not in the capture
        self.engine.request_missing(it.file, it.frame, it.ts, it.client, it.broker)
        return None

    def findings(self) -> list[Finding]:
        """The findings engine's and the traffic findings, in report order (once, at the end)."""
        self.traffic.finish()
        found = (self.engine.finish(self.tracker, self.savings.per_pair)
                 + traffic_findings.findings(self.traffic, self.partition_errors))
        return sorted(found, key=attrgetter("sort_key"))

    def broker_summaries(self) -> list[BrokerSummary]:
        stats = self.traffic.broker_stats()
        timelines = self.timeline.timelines()
        return [replace(b, traffic=stats[b.broker].summary() if b.broker in stats else b.traffic,
                        timeline=timelines.get(b.broker))
                for b in self.tracker.broker_summaries()]  # fmt: skip

    def session_lives(self) -> list[SessionLife]:
        """Every session's life, with the traffic of its fetches."""
        stats = self.traffic.session_stats()
        out = []
        for s in self.tracker.sessions:
            st = stats.get(id(s))
            life = s.life()
            out.append(life if st is None else replace(life, traffic=st.summary()))
        return out

    def client_summaries(self) -> list:
        stats = self.traffic.client_stats()
        return [replace(c, traffic=stats[(c.host, c.client_id)].summary()) if (c.host, c.client_id) in stats else c
                for c in self.tracker.client_summaries()]  # fmt: skip


def analyze_items(items: Iterable, *, files: Iterable[str] = (), cache_slots: int | None = None,
                  cache_shards: int | None = None, decode_report=None,
                  savings_of: Callable[[Exchange], bool] | None = None,
                  eviction_ms: int = DEFAULT_EVICTION_MS) -> Analysis:  # fmt: skip
    """Exchanges (and OrphanResponses) in request order -> Analysis. ``savings_of``: see savings_filter."""
    run = AnalysisPass(cache_slots, cache_shards, savings_of, files, eviction_ms)
    feed = run.feed
    for it in items:
        feed(it)
    engine = run.engine
    decode = {}
    if decode_report is not None:
        decode = decode_report.to_dict()
        engine.decode_quality(decode_report)
    clients = tuple(sorted(run.client_summaries(), key=lambda c: (c.host, c.client_id or "")))
    findings = annotate(tuple(run.findings()), clients, decode_report)
    capture = run.totals.capture_summary(run.files, decode)
    return Analysis(
        capture=capture,
        brokers=tuple(sorted(run.broker_summaries(), key=lambda b: b.broker)),
        clients=clients,
        sessions=tuple(run.session_lives()),
        findings=findings,
        savings=run.savings.result().to_json(),
        partition_errors=tuple(run.partition_errors.rows()),
    )


def analyze_capture(paths, *, ports=None, cache_slots: int | None = None, cache_shards: int | None = None,
                    client: str | None = None, broker: str | None = None,
                    eviction_ms: int = DEFAULT_EVICTION_MS) -> Analysis:
    """Decode capture files and analyse them, keeping what concerns ``client`` and/or ``broker`` if given.
    Raises CaptureError (one line) only when nothing could be read."""
    from fetchtool.decoder import decode_capture

    run = decode_capture(paths, ports)
    analysis = analyze_items(run, cache_slots=cache_slots, cache_shards=cache_shards, decode_report=run.report,
                             savings_of=savings_filter(client, broker), eviction_ms=eviction_ms)
    return filtered(analysis, client, broker)


def filtered(analysis: Analysis, client: str | None = None, broker: str | None = None) -> Analysis:
    """Keep the clients, sessions, findings and brokers that concern one client (client id, host or ip:port)
    and/or one broker (ip:port or host). The savings are kept as they are: filter them on the way in
    (savings_filter)."""
    if not client and not broker:
        return analysis
    clients = tuple(
        c for c in analysis.clients
        if (not client or client == c.client_id or client == c.host or client in c.addresses)
        and (not broker or any(is_broker(broker, b) for b in c.brokers))
    )  # fmt: skip
    sessions = tuple(s for s in analysis.sessions
                     if is_client(client, s.client, s.client_id) and is_broker(broker, s.broker))
    # A broker's own finding (no client, e.g. MAX_WAIT_IGNORED) concerns every client of that broker.
    used = {b for c in clients for b in c.brokers}
    findings: tuple[Finding, ...] = tuple(
        f for f in analysis.findings
        if is_broker(broker, f.broker) and (is_client(client, f.client, f.client_id)
                                            or (f.client is None and f.broker is not None and f.broker in used))
    )  # fmt: skip
    brokers = tuple(b for b in analysis.brokers if is_broker(broker, b.broker))
    partition_errors = tuple(r for r in analysis.partition_errors
                             if is_client(client, r.client, r.client_id) and is_broker(broker, r.broker))
    return Analysis(analysis.capture, brokers, clients, sessions, findings, analysis.savings, partition_errors)
