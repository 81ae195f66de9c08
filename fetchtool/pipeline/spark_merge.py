"""Stage 3 of the Spark engine (per broker, on executors) and the driver-side merge into one Analysis.

`analyze_broker` feeds one broker's items, in request order, to the per-item step the polars engine runs over
everything (fetchtool.analysis.run.AnalysisPass); it also notes the run-wide position (the request-order sort
key) at which each client, address, broker, software string, session and request kind was first seen, so
`merge` can give lists and dicts the order one sequential pass would have given them, however the exchanges
were split across brokers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from itertools import islice

from fetchtool.analysis.diagnosis.findings import FindingsEngine
from fetchtool.analysis.diagnosis.software_notes import annotate
from fetchtool.analysis.model import Analysis, ClientSummary, Finding
from fetchtool.analysis.run import AnalysisPass, Kept, _Totals, kept_view
from fetchtool.analysis.savings.estimator import SavingsEstimator
from fetchtool.analysis.tracking.partition_errors import row_order
from fetchtool.analysis.tracking.tracker import SessionTracker, TrackedClient
from fetchtool.analysis.tracking.traffic import TrafficStats
from fetchtool.exchange import Exchange
from fetchtool.pipeline.spark_stages import savings_client


@dataclass
class _Client:
    """A client as one broker saw it, and where (sort key) each of its values was first seen."""

    tracked: TrackedClient
    addresses: dict = field(default_factory=dict)  # value -> first sort key
    brokers: dict = field(default_factory=dict)
    software: dict = field(default_factory=dict)
    sessions: dict = field(default_factory=dict)
    kinds: dict = field(default_factory=dict)

    def note(self, key) -> None:
        """Note ``key`` for the values the exchange just fed added (the tracker's dicts only grow, in order)."""
        t = self.tracked
        for seen, notes in ((t.addresses, self.addresses), (t.brokers, self.brokers), (t.software, self.software),
                            (t.sessions, self.sessions), (t.kinds, self.kinds)):
            new = len(seen) - len(notes)
            if new > 0:  # the newest values, read from the end: a client of 100,000 sessions is no slower
                for value in reversed(list(islice(reversed(seen), new))):
                    notes[value] = key


@dataclass
class BrokerPart:
    """What one broker's group produced."""

    broker: str
    totals: _Totals
    summaries: list
    sessions: list  # (first sort key, SessionLife)
    clients: dict  # (host, client id) -> _Client
    findings: list  # (index, Finding)
    savings: SavingsEstimator | None  # None: estimated apart, per client (estimate_savings)
    first_key: tuple = ()
    files: dict = field(default_factory=dict)  # file -> first sort key
    traffic: dict = field(default_factory=dict)  # (host, client id) -> TrafficStats of this broker's fetches
    partition_errors: list = field(default_factory=list)  # PartitionErrorRow (each belongs to one broker)
    kept: Kept | None = None  # the counts of the exchanges --client / --broker keep (run.Kept)
    cpu_s: float = 0.0  # the group's CPU seconds on its executor (for the progress line)


class PairsOnly:
    """In place of the SavingsEstimator when the savings were estimated apart (per client: `estimate_savings`):
    feeds nothing, and gives the findings the per-pair sums they read."""

    def __init__(self, per_pair: dict):
        self.per_pair = per_pair

    def feed(self, ex) -> None:
        return None

    def connection_ended(self, conn: int) -> None:
        return None


class SessionlessPairs:
    """In place of the SavingsEstimator when the savings are estimated apart and at the same time (per client:
    `estimate_savings`): the broker's own pass estimates the (broker, client) groups that may be sessionless
    (one SavingsEstimator each, fed as estimate_savings feeds it), which are the only pairs whose per-pair sums
    the findings read (SESSIONLESS_CLIENT); every other exchange is skipped."""

    def __init__(self, clients: Iterable[str], savings_of=None):
        self.clients = frozenset(clients)
        self.models: dict[str, SavingsEstimator] = {}
        self.savings_of = savings_of

    def feed(self, ex) -> None:
        client = savings_client(ex)
        if client in self.clients:
            model = self.models.get(client)
            if model is None:
                model = self.models[client] = SavingsEstimator(only=self.savings_of)
            model.feed(ex)

    def connection_ended(self, conn: int) -> None:
        for model in self.models.values():
            model.connection_ended(conn)

    @property
    def per_pair(self) -> dict:
        return {k: v for m in self.models.values() for k, v in m.per_pair.items()}


def estimate_savings(items, savings_of=None) -> SavingsEstimator:
    """The savings of one (broker, client) group's exchanges, in request order: a SavingsEstimator's state is
    per client stream, so groups add up to the one-pass estimate (SavingsEstimator.merge)."""
    savings = SavingsEstimator(only=savings_of)
    for _key, it in items:
        if isinstance(it, Exchange):
            savings.feed(it)
        elif type(it) is int:  # a connection's end (spark_stages.finished_items)
            savings.connection_ended(it)
    savings.drop_models()  # the driver's merge reads only the sums
    return savings


def analyze_broker(broker: str, items, last_ts: float | None, cache_slots=None, cache_shards=None,
                   savings_of=None, per_pair: dict | None = None, sessionless: Iterable[str] | None = None
                   ) -> BrokerPart:
    """items: (sort key, Exchange | OrphanResponse | a connection's end: its id) of one broker, in request order.
    ``savings_of``: which exchanges the savings count (fetchtool.analysis.run.savings_filter; None: all).
    ``per_pair``: the savings were estimated apart (estimate_savings): their per-pair sums, for the findings; the
    part has no savings. ``sessionless``: the savings are being estimated apart, and these clients ("host|client
    id") of the broker may be sessionless: their per-pair sums are estimated here (SessionlessPairs); the part has
    no savings."""
    run = AnalysisPass(cache_slots, cache_shards, savings_of)
    if per_pair is not None:
        run.savings = PairsOnly(per_pair)  # type: ignore[assignment]  # duck-typed: feed() and per_pair only
    elif sessionless is not None:
        run.savings = SessionlessPairs(sessionless, savings_of)  # type: ignore[assignment]  # duck-typed, too
    run.engine.last_ts = last_ts  # RESPONSE_MISSING compares with the end of the whole capture, not of this broker
    sessions = run.tracker.sessions
    first_seen: dict[int, tuple] = {}  # id(TrackedSession) -> sort key
    notes: dict[tuple, _Client] = {}
    first_key = None
    files: dict = {}
    for key, it in items:
        if type(it) is int:  # a connection's end (spark_stages.finished_items), where one sequential pass has it
            run.connection_ended(it)
            continue
        if first_key is None:
            first_key = key
        n_sessions = len(sessions)
        obs = run.feed(it)
        if obs is None:  # an OrphanResponse
            continue
        if it.file not in files:
            files[it.file] = key
        if len(sessions) > n_sessions:
            for s in sessions[n_sessions:]:
                first_seen[id(s)] = key
        tc = obs.client
        c = notes.get((tc.host, tc.client_id))
        if c is None:
            c = notes[(tc.host, tc.client_id)] = _Client(tc)
        c.note(key)
    findings = run.findings()
    lives = [(first_seen[id(s)], life) for s, life in zip(sessions, run.session_lives())]
    savings = run.savings
    if isinstance(savings, SavingsEstimator):
        savings.drop_models()
    else:
        savings = None
    return BrokerPart(broker, run.totals, run.broker_summaries(), lives, notes,
                      list(enumerate(findings)), savings, first_key or (), files, run.traffic.client_stats(),
                      run.partition_errors.rows(), run.kept)


def merge(parts: list[BrokerPart], decode_report, cache_slots=None, cache_shards=None,
          savings: list[SavingsEstimator] | None = None) -> Analysis:
    """The per-broker parts -> one Analysis, as analyze_items would have produced in one sequential pass.
    ``savings``: the estimates made apart (else each part's)."""
    parts = sorted(parts, key=lambda p: p.first_key)
    totals = _Totals()
    for p in parts:
        totals.merge(p.totals)
    files = _ordered(p.files for p in parts)  # as analyze_items: files that had exchanges, in request order
    decode = {}
    findings: list[tuple[tuple, Finding]] = []  # ((the finding's sort key, part rank, index), finding)
    for rank, p in enumerate(parts):
        findings.extend(((f.sort_key, rank, i), f) for i, f in p.findings)
    if decode_report is not None:
        decode = decode_report.to_dict()
        quality = FindingsEngine(cache_slots, cache_shards)
        quality.decode_quality(decode_report)
        findings.extend(((f.sort_key, len(parts), i), f) for i, f in enumerate(quality.finish(SessionTracker())))
    kept = None
    for p in parts:
        if p.kept is not None:
            if kept is None:
                kept = Kept(p.kept.filters)
            kept.merge(p.kept)
    sessions = sorted((s for p in parts for s in p.sessions), key=lambda ks: ks[0])
    every_client = tuple(sorted(_merge_clients(parts), key=lambda c: (c.host, c.client_id or "")))
    # as analyze_items: the counts every exchange gives, or those of the exchanges --client / --broker keep
    capture, brokers, clients = kept_view(kept, totals, files, decode, (b for p in parts for b in p.summaries),
                                          every_client)
    return Analysis(
        capture=capture,
        brokers=brokers,
        clients=clients,
        sessions=tuple(s for _k, s in sessions),
        findings=annotate(tuple(f for _k, f in sorted(findings, key=lambda kf: kf[0])), every_client,
                          decode_report),
        savings=_merge_savings(savings if savings is not None else [p.savings for p in parts if p.savings]),
        partition_errors=tuple(sorted((r for p in parts for r in p.partition_errors), key=row_order)),
    )


def _ordered(dicts) -> tuple:
    first: dict = {}
    for d in dicts:
        for v, k in d.items():
            if v not in first or k < first[v]:
                first[v] = k
    return tuple(v for v, _k in sorted(first.items(), key=lambda vk: vk[1]))


def _merge_clients(parts: list[BrokerPart]) -> list[ClientSummary]:
    """One TrackedClient per client from its per-broker ones (counts add up, values in order of first sight),
    summarised as the tracker summarises the one-pass client."""
    groups: dict[tuple, list[_Client]] = {}
    for p in parts:
        for ckey, c in p.clients.items():
            groups.setdefault(ckey, []).append(c)
    out = []
    for (host, client_id), cs in groups.items():
        merged = TrackedClient(client_id, host)
        kinds: Counter = Counter()
        for c in cs:
            merged.versions.update(c.tracked.versions)
            merged.errors.update(c.tracked.errors)
            merged.exchanges += c.tracked.exchanges
            kinds.update(c.tracked.kinds)
        for name in ("addresses", "brokers", "software", "sessions"):
            setattr(merged, name, dict.fromkeys(_ordered(getattr(c, name) for c in cs)))
        for kind in _ordered(c.kinds for c in cs):
            merged.kinds[kind] = kinds[kind]
        traffic = TrafficStats()
        found = False
        for p in parts:
            st = p.traffic.get((host, client_id))
            if st is not None:
                traffic.merge(st)
                found = True
        summary = merged.summary()
        out.append(replace(summary, traffic=traffic.summary()) if found else summary)
    return out


def merged_savings(estimators: list[SavingsEstimator]) -> SavingsEstimator:
    merged = SavingsEstimator()
    for e in estimators:
        merged.merge(e)
    return merged


def _merge_savings(estimators: list[SavingsEstimator]) -> dict:
    """Savings state is per (client, broker) stream, so per-broker estimates add up to the one-pass estimate."""
    merged = SavingsEstimator()
    for e in estimators:
        merged.merge(e)
    return merged.result().to_json()
