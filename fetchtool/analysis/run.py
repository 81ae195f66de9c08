"""The analysis pipeline: decode -> track sessions -> findings -> savings -> one Analysis object.

Streaming: exchanges are consumed one by one and dropped; only per-session and per-client state is kept.
`AnalysisPass` is the per-item step both engines run (analyze_items over everything, the Spark engine over one
broker's items); `analyze_items` is the core (any iterable of Exchange / OrphanResponse, e.g. from another
engine); `analyze_capture` adds the decoder at the edge.
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from itertools import chain
from operator import attrgetter
from typing import TYPE_CHECKING, cast

from fetchtool.exchange import FETCH_SNAPSHOT, Exchange

from fetchtool.sessions.cache import DEFAULT_EVICTION_MS

from fetchtool.analysis.diagnosis import traffic as traffic_findings
from fetchtool.analysis.diagnosis.findings import FindingsEngine
from fetchtool.analysis.diagnosis.software_notes import annotate
from fetchtool.analysis.model import Analysis, BrokerSummary, CaptureSummary, ClientSummary, Finding, SessionLife
from fetchtool.analysis.savings.estimator import SavingsEstimator
from fetchtool.analysis.shown import choose
from fetchtool.analysis.tracking.partition_errors import PartitionErrors
from fetchtool.analysis.tracking.timeline import TimelineTracker
from fetchtool.analysis.tracking.tracker import Observation, SessionTracker, TrackedSession, host_of
from fetchtool.analysis.tracking.traffic import TrafficTracker

if TYPE_CHECKING:
    from fetchtool.decoding.forked import SideConsumer


_records_bytes = attrgetter("records_bytes")


class _Totals:
    __slots__ = ("exchanges", "fetch", "snapshot", "first_ts", "last_ts", "request_bytes", "response_bytes", "records")

    def __init__(self) -> None:
        self.exchanges = self.fetch = self.snapshot = 0
        self.first_ts: float | None = None
        self.last_ts: float | None = None
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


class Keep:
    """The --client / --broker rule over exchanges (a class, not a lambda: Spark ships it to executors), and the
    filters it was made from, which the report names."""

    __slots__ = ("client", "broker")

    def __init__(self, client: str | None, broker: str | None) -> None:
        self.client, self.broker = client, broker

    def __call__(self, ex: Exchange) -> bool:
        return concerns(ex, self.client, self.broker)

    def filters(self) -> dict:
        return {k: v for k, v in (("client", self.client), ("broker", self.broker)) if v}


def savings_filter(client: str | None, broker: str | None) -> Keep | None:
    """Which exchanges the report counts under --client / --broker (None: all of them): the savings, the capture
    totals and each broker's counts are sums over exchanges, so they are kept on the way in (Kept). Sessions and
    findings are filtered after the analysis (filtered), since their causes may lie in other clients' traffic."""
    if not client and not broker:
        return None
    return Keep(client, broker)


class _KeptBroker:
    __slots__ = ("exchanges", "refused", "errors", "clients")

    def __init__(self) -> None:
        self.exchanges = self.refused = 0
        self.errors: Counter = Counter()
        self.clients: set = set()


class _KeptClient:
    __slots__ = ("exchanges", "versions", "kinds", "errors", "addresses", "brokers")

    def __init__(self) -> None:
        self.exchanges = 0
        self.versions: Counter = Counter()
        self.kinds: Counter = Counter()
        self.errors: Counter = Counter()
        self.addresses: set = set()
        self.brokers: set = set()

    def merge(self, o: _KeptClient) -> None:
        self.exchanges += o.exchanges
        for mine, theirs in ((self.versions, o.versions), (self.kinds, o.kinds), (self.errors, o.errors)):
            mine.update(theirs)
        self.addresses |= o.addresses
        self.brokers |= o.brokers


class Kept:
    """The capture totals, per-broker and per-client counts of the exchanges --client / --broker keep: a broker's
    counts under --client are that client's exchanges with it, a client's under --broker its exchanges with
    that broker."""

    __slots__ = ("filters", "totals", "brokers", "clients")

    def __init__(self, filters: dict) -> None:
        self.filters = filters
        self.totals = _Totals()
        self.brokers: dict[str, _KeptBroker] = {}
        self.clients: dict[tuple, _KeptClient] = {}

    def add(self, ex: Exchange, obs: Observation) -> None:
        self.totals.add(ex)
        b = self.brokers.get(ex.broker)
        if b is None:
            b = self.brokers[ex.broker] = _KeptBroker()
        b.exchanges += 1
        b.clients.add((obs.client.host, obs.client.client_id))
        b.refused += obs.refused
        c = self.clients.get(ck := (obs.client.host, obs.client.client_id))
        if c is None:
            c = self.clients[ck] = _KeptClient()
        c.exchanges += 1
        if ex.api_key != FETCH_SNAPSHOT:  # as the tracker counts them
            c.versions[ex.api_version] += 1
        c.kinds[obs.kind] += 1
        c.addresses.add(ex.client)
        c.brokers.add(ex.broker)
        if ex.error_code:
            b.errors[ex.error_code] += 1
            c.errors[ex.error_code] += 1

    def merge(self, other: Kept) -> None:
        """Add another part's counts (the Spark engine's per-broker parts)."""
        self.totals.merge(other.totals)
        for name, o in other.brokers.items():
            b = self.brokers.setdefault(name, _KeptBroker())
            b.exchanges += o.exchanges
            b.refused += o.refused
            b.errors.update(o.errors)
            b.clients |= o.clients
        for key, oc in other.clients.items():
            self.clients.setdefault(key, _KeptClient()).merge(oc)

    def broker(self, summary: BrokerSummary) -> BrokerSummary:
        """A broker's summary with the kept exchanges' counts. Its cache (max live sessions) stays the broker's;
        its traffic figures, over every client's fetches, are dropped under --client."""
        b = self.brokers.get(summary.broker) or _KeptBroker()
        return replace(summary, exchanges=b.exchanges, clients=len(b.clients), refused_creations=b.refused,
                       errors={str(k): v for k, v in sorted(b.errors.items())},
                       traffic=None if "client" in self.filters else summary.traffic)

    def client(self, summary: ClientSummary) -> ClientSummary:
        """A client's summary with the kept exchanges' counts, in the order the whole run listed them; its traffic
        figures, over every broker, are dropped under --broker."""
        c = self.clients.get((summary.host, summary.client_id)) or _KeptClient()
        return replace(
            summary, exchanges=c.exchanges, addresses=tuple(a for a in summary.addresses if a in c.addresses),
            brokers=tuple(b for b in summary.brokers if b in c.brokers),
            fetch_versions={f"v{v}": n for v, n in sorted(c.versions.items())},
            request_kinds={k: c.kinds[k] for k in summary.request_kinds if c.kinds[k]},
            errors={str(k): v for k, v in sorted(c.errors.items())},
            sessions=tuple(s for s in summary.sessions if s[0] in c.brokers),
            traffic=None if "broker" in self.filters else summary.traffic)


class AnalysisPass:
    """The analysis cores (SessionTracker, FindingsEngine, SavingsEstimator) fed one item at a time, in request
    order: analyze_items runs one over a whole run, the Spark engine one per broker
    (fetchtool.pipeline.spark_merge). ``savings_of``: see savings_filter; ``files``: files to list first."""

    __slots__ = ("tracker", "engine", "totals", "savings", "files", "traffic", "partition_errors", "timeline",
                 "only", "kept")

    def __init__(self, cache_slots: int | None = None, cache_shards: int | None = None,
                 savings_of: Callable[[Exchange], bool] | None = None, files: Iterable[str] = (),
                 eviction_ms: int = DEFAULT_EVICTION_MS) -> None:
        self.tracker = SessionTracker()
        self.engine = FindingsEngine(cache_slots, cache_shards, eviction_ms)
        self.totals = _Totals()
        self.savings = SavingsEstimator(only=savings_of)
        self.files: dict[str, None] = dict.fromkeys(files)  # the files that had exchanges, in request order
        self.traffic = TrafficTracker(traffic_findings.STORM_REFETCHES, self.tracker.brokers,
                                      self.tracker.sessions)
        self.partition_errors = PartitionErrors()
        self.timeline = TimelineTracker()
        self.only = savings_of
        self.kept = None if savings_of is None else Kept(getattr(savings_of, "filters", dict)())

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
            if self.kept is not None and self.only is not None and self.only(it):
                self.kept.add(it, obs)
            return obs
        # OrphanResponse: a response whose request is not in the capture
        self.engine.request_missing(it.file, it.frame, it.ts, it.client, it.broker)
        return None

    def connection_ended(self, conn: int) -> None:
        """Connection ``conn`` closed and every item of it has been fed (decoder.DecodeRun.ended): what was kept
        for it alone is folded into the counts (memory bounded by open connections, not by connections seen).
        The tracker's and findings' report is the same with or without these calls; the savings estimate's is
        not: its models are per client ip:port, and a port's next connection is a new stream once this one
        ended (SavingsEstimator.connection_ended)."""
        broker = self.tracker.connection_ended(conn)
        if broker is not None:
            self.engine.session_use.connection_ended(broker, conn)
        self.savings.connection_ended(conn)

    def findings(self) -> list[Finding]:
        """The findings engine's and the traffic findings, in report order (once, at the end)."""
        self.traffic.finish()
        found = (self.engine.finish(self.tracker, lambda: self.savings.per_pair)  # (read late: _Apart waits)
                 + traffic_findings.findings(self.traffic, self.partition_errors))
        return sorted(found, key=attrgetter("sort_key"))

    def broker_summaries(self) -> list[BrokerSummary]:
        """Every broker's summary, as the whole capture shows it (kept_view: as --client / --broker keep it)."""
        stats = self.traffic.broker_stats()
        timelines = self.timeline.timelines()
        return [replace(b, traffic=stats[b.broker].summary() if b.broker in stats else b.traffic,
                        timeline=timelines.get(b.broker))
                for b in self.tracker.broker_summaries()]  # fmt: skip

    def session_lives(self) -> list[SessionLife]:
        """Every session's life, with the traffic of its fetches."""
        return list(self.iter_session_lives())

    def iter_session_lives(self) -> Iterator[SessionLife]:
        """session_lives one at a time."""
        return map(self.session_life(), self.tracker.sessions)

    def session_life(self) -> Callable[[TrackedSession], SessionLife]:
        """A tracked session -> its life, with the traffic of its fetches (analysis.shown.choose makes the lives
        of the sessions a report lists, and only those)."""
        stats = self.traffic.session_stats()

        def life(s: TrackedSession) -> SessionLife:
            st = stats.get(id(s))
            made = s.life()
            return made if st is None else replace(made, traffic=st.summary())

        return life

    def client_summaries(self) -> list:
        stats = self.traffic.client_stats()
        return [replace(c, traffic=stats[(c.host, c.client_id)].summary()) if (c.host, c.client_id) in stats else c
                for c in self.tracker.client_summaries()]  # fmt: skip


@contextmanager
def without_cycle_collection() -> Iterator[None]:
    """The cyclic garbage collector off while a run is analysed. The pass keeps per-session and per-connection
    state for the whole run (a 100,000-session capture: millions of objects), then replays each broker's cache
    for the findings, and frees what it drops by reference counting: every collection walked that state again
    and found next to nothing to free (storm100k: 2,900 objects in all, for 40 collections and 2-3 s of CPU).
    Whatever cycle is left is collected once the collector is back on."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def analyze_items(items: Iterable, *, files: Iterable[str] = (), cache_slots: int | None = None,
                  cache_shards: int | None = None, decode_report=None,
                  savings_of: Callable[[Exchange], bool] | None = None,
                  eviction_ms: int = DEFAULT_EVICTION_MS, ended: list[int] | None = None,
                  sessions: int | None = None, savings_side: SideConsumer | None = None) -> Analysis:  # fmt: skip
    """Exchanges (and OrphanResponses) in request order -> Analysis. ``savings_of``: see savings_filter.
    ``ended``: the decode run's list of closed connections (decoder.DecodeRun.ended), drained as items come.
    ``sessions``: list at most this many sessions (analysis.shown; None: every one). ``savings_side``: the
    decode run's side consumer made by savings_apart for the same items; when it runs (once the first item is
    asked for), the savings are estimated there and not here."""
    with without_cycle_collection():
        return _analyze(items, files, cache_slots, cache_shards, decode_report, savings_of, eviction_ms, ended,
                        sessions, savings_side)


def _analyze(items: Iterable, files: Iterable[str], cache_slots: int | None, cache_shards: int | None,
             decode_report, savings_of: Callable[[Exchange], bool] | None, eviction_ms: int,
             ended: list[int] | None, sessions: int | None, side: SideConsumer | None) -> Analysis:
    run = AnalysisPass(cache_slots, cache_shards, savings_of, files, eviction_ms)
    items = iter(items)
    first = next(items, _NOTHING)  # (starts the decoding, and the side consumer if the run has one)
    if first is not _NOTHING:
        items = chain((first,), items)
    if side is not None and side.running:
        run.savings = _Apart(side)  # type: ignore[assignment]  # duck-typed: feeds nothing; the sums come at the end
        try:
            return _analyzed(run, items, files, decode_report, ended, sessions)
        finally:
            side.wait()  # (done already, unless the analysis failed: the process is reaped either way)
    return _analyzed(run, items, files, decode_report, ended, sessions)


def draining(items: Iterable, ended: list[int] | None, on_end: Callable[[int], None]) -> Iterator:
    """`items`, each after ``on_end(conn)`` for every connection that ended before it, and then the connections
    that ended after the last (``ended``: the decode run's list, decoder.DecodeRun.ended, drained as the items
    come; None: no ends to tell). The Spark engine's stages hear of the same ends in the same places."""
    if ended is None:
        yield from items
        return
    for it in items:
        if ended:
            for conn in ended:
                on_end(conn)
            ended.clear()
        yield it
    for conn in ended:
        on_end(conn)
    ended.clear()


def _analyzed(run: AnalysisPass, items: Iterator, files: Iterable[str], decode_report, ended: list[int] | None,
              sessions: int | None) -> Analysis:
    feed = run.feed
    for it in draining(items, ended, run.connection_ended):
        feed(it)
    # the savings are complete: sum them up and let the per-connection models go before the findings replay
    # each broker's cache (peak memory: that replay beside the state of the pass). (Estimated apart, they are
    # waited for when first needed: this process replays the caches meanwhile.)
    later = isinstance(run.savings, _Apart)
    savings = None if later else run.savings.result().to_json()
    run.savings.release()
    run.tracker.fed()
    engine = run.engine
    decode = {}
    if decode_report is not None:
        decode = decode_report.to_dict()
        engine.decode_quality(decode_report)
    clients = tuple(sorted(run.client_summaries(), key=lambda c: (c.host, c.client_id or "")))
    findings = annotate(tuple(run.findings()), clients, decode_report)
    capture, brokers, clients = kept_view(run.kept, run.totals, run.files, decode, run.broker_summaries(), clients)
    shown = choose(run.tracker.sessions, sessions, run.session_life())
    if savings is None:
        savings = run.savings.result().to_json()  # (estimated apart: the side consumer's, by now)
    return Analysis(
        capture=capture,
        brokers=brokers,
        clients=clients,
        sessions=shown.sessions,
        findings=findings,
        savings=savings,
        partition_errors=tuple(run.partition_errors.rows()),
        sessions_total=shown.total,
        never_used=shown.never_used,
    )


_NOTHING = object()


class _Apart:
    """In place of the SavingsEstimator when the decode run's side consumer estimates the savings (savings_apart):
    feeds nothing; its results are the side consumer's, waited for when first read."""

    def __init__(self, side: SideConsumer) -> None:
        self.side = side

    def feed(self, ex) -> None:
        return None

    def connection_ended(self, conn: int) -> None:
        return None

    def release(self) -> None:
        return None

    def _results(self) -> tuple[dict, dict]:
        done = self.side.wait()
        if done is None:  # (killed, or a bug: the decoding child's failures are told the same way)
            from fetchtool.capture.reader import CaptureError

            raise CaptureError("the savings estimating process stopped unexpectedly")
        return cast("tuple[dict, dict]", done)

    def result(self) -> _Apart:
        return self   # (to_json(): the side consumer's)

    def to_json(self) -> dict:
        return self._results()[0]

    @property
    def per_pair(self) -> dict:
        return self._results()[1]


def savings_apart(savings_of: Callable[[Exchange], bool] | None = None,
                  keeps: Callable[[object], bool] | None = None) -> SideConsumer:
    """A side consumer (decoding.forked.SideConsumer) estimating the savings of a decode run's items in a process of
    its own, as analyze_items would (``savings_of``: see savings_filter): analyze_items(savings_side=...) then
    leaves them out. ``keeps``: the items the analysis is fed (a time window), None: all. The savings need
    nothing of the rest of the analysis, and are half its work on a capture of many connections."""
    from fetchtool.decoding.forked import SideConsumer

    def consume(items: Iterator, ended: list[int]) -> tuple[dict, dict]:
        with without_cycle_collection():
            est = SavingsEstimator(only=savings_of)
            # (connection ends as _analyzed tells them; the items the analysis is not fed feed nothing)
            for it in draining(items, ended, est.connection_ended):
                if isinstance(it, Exchange) and (keeps is None or keeps(it)):
                    est.feed(it)
            return est.result().to_json(), est.per_pair

    return SideConsumer(consume)


def bounded(analysis: Analysis, sessions: int | None) -> Analysis:
    """The analysis listing at most ``sessions`` sessions (analysis.shown), counted over the ones it lists."""
    shown = choose(analysis.sessions, sessions)
    return replace(analysis, sessions=shown.sessions, sessions_total=shown.total, never_used=shown.never_used)


def kept_view(kept: Kept | None, totals: _Totals, files, decode: dict, brokers: Iterable[BrokerSummary],
              clients: tuple[ClientSummary, ...]):
    """The capture, broker and client summaries the report shows: every exchange's, or (--client / --broker)
    the kept exchanges', with the filters named. Clients come sorted; brokers are sorted here."""
    brokers = sorted(brokers, key=lambda b: b.broker)
    if kept is None:
        return totals.capture_summary(files, decode), tuple(brokers), clients
    capture = replace(kept.totals.capture_summary(files, decode), filters=dict(kept.filters))
    return capture, tuple(kept.broker(b) for b in brokers), tuple(kept.client(c) for c in clients)


def analyze_capture(paths, *, ports=None, cache_slots: int | None = None, cache_shards: int | None = None,
                    client: str | None = None, broker: str | None = None,
                    eviction_ms: int = DEFAULT_EVICTION_MS) -> Analysis:
    """Decode capture files and analyse them, keeping what concerns ``client`` and/or ``broker`` if given.
    Raises CaptureError (one line) only when nothing could be read."""
    from fetchtool.decoder import decode_capture

    run = decode_capture(paths, ports)
    analysis = analyze_items(run, cache_slots=cache_slots, cache_shards=cache_shards, decode_report=run.report,
                             savings_of=savings_filter(client, broker), eviction_ms=eviction_ms, ended=run.ended)
    return filtered(analysis, client, broker)


def filtered(analysis: Analysis, client: str | None = None, broker: str | None = None) -> Analysis:
    """Keep the clients, sessions, findings and brokers that concern one client (client id, host or ip:port)
    and/or one broker (ip:port or host). The counts (capture totals, each broker's and client's, savings) are
    kept on the way in (savings_filter, Kept); here the rows go, and a broker's sessions are counted again."""
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
    # under --client, only the brokers the client fetched from, with its sessions there
    brokers = tuple(b for b in analysis.brokers if is_broker(broker, b.broker) and (not client or b.broker in used))
    if client:
        brokers = tuple(replace(b, sessions_created=sum(1 for s in sessions if s.broker == b.broker
                                                        and not s.started_before_capture),
                                sessions_seen=sum(1 for s in sessions if s.broker == b.broker)) for b in brokers)
    partition_errors = tuple(r for r in analysis.partition_errors
                             if is_client(client, r.client, r.client_id) and is_broker(broker, r.broker))
    return Analysis(analysis.capture, brokers, clients, sessions, findings, analysis.savings, partition_errors)
