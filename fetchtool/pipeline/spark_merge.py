"""Stage 3 of the Spark engine (per broker, on executors) and the driver-side merge into one Analysis.

`analyze_broker` runs the analysis cores (SessionTracker, FindingsEngine, SavingsEstimator) over one broker's
items in request order, exactly as fetchtool.analysis.run.analyze_items does over everything; it also notes the
run-wide position (the request-order sort key) at which each client, address, session and software string was
first seen, so `merge` can give lists the order one sequential pass would have given them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import islice

from fetchtool.analysis.findings import FindingsEngine
from fetchtool.analysis.model import Analysis, ClientSummary
from fetchtool.analysis.run import _Totals
from fetchtool.analysis.savings import SavingsEstimator
from fetchtool.analysis.tracker import SessionTracker, host_of
from fetchtool.exchange import Exchange


@dataclass
class _Client:
    client_id: str | None
    host: str
    addresses: dict = field(default_factory=dict)  # value -> first sort key
    brokers: dict = field(default_factory=dict)
    software: dict = field(default_factory=dict)
    sessions: dict = field(default_factory=dict)
    kinds: dict = field(default_factory=dict)
    versions: Counter = field(default_factory=Counter)
    kind_counts: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)
    exchanges: int = 0
    nsessions: int = 0


@dataclass
class BrokerPart:
    """What one broker's group produced."""

    broker: str
    totals: _Totals
    summaries: list
    sessions: list  # (first sort key, SessionLife)
    clients: dict  # (host, client id) -> _Client
    findings: list  # (index, Finding)
    savings: SavingsEstimator
    first_key: tuple = ()
    files: dict = field(default_factory=dict)  # file -> first sort key


def _note(d: dict, value, key) -> None:
    if value not in d:
        d[value] = key


def analyze_broker(broker: str, items, last_ts: float | None, cache_slots=None, cache_shards=None,
                   savings_of=None) -> BrokerPart:
    """items: (sort key, Exchange | OrphanResponse) of one broker, in request order. ``savings_of``: which
    exchanges the savings count (fetchtool.analysis.run.savings_filter; None: all)."""
    tracker = SessionTracker()
    engine = FindingsEngine(cache_slots, cache_shards)
    engine.last_ts = last_ts  # RESPONSE_MISSING compares with the end of the whole capture, not of this broker
    totals = _Totals()
    savings = SavingsEstimator()
    first_seen: dict[int, tuple] = {}  # id(TrackedSession) -> sort key
    notes: dict[tuple, _Client] = {}
    first_key = None
    files: dict = {}
    for key, it in items:
        if first_key is None:
            first_key = key
        if not isinstance(it, Exchange):
            engine.request_missing(it.file, it.frame, it.ts, it.client, it.broker)
            continue
        totals.add(it)
        _note(files, it.file, key)
        n_sessions = len(tracker.sessions)
        engine.observe(tracker.feed(it))
        if savings_of is None or savings_of(it):
            savings.feed(it)
        for s in tracker.sessions[n_sessions:]:
            first_seen[id(s)] = key
        ckey = (host_of(it.client), it.client_id)
        c = notes.get(ckey)
        if c is None:
            c = notes[ckey] = _Client(it.client_id, ckey[0])
        _note(c.addresses, it.client, key)
        _note(c.brokers, it.broker, key)
        if it.client_software:
            _note(c.software, it.client_software, key)
        tc = tracker.clients[ckey]
        if len(tc.sessions) > c.nsessions:  # new sessions are appended: look at the new ones only
            for skey in islice(tc.sessions, c.nsessions, None):
                _note(c.sessions, skey, key)
            c.nsessions = len(tc.sessions)
    findings = engine.finish(tracker)
    for ckey, tc in tracker.clients.items():
        c = notes[ckey]
        c.versions.update(tc.versions)
        c.kind_counts.update(tc.kinds)
        for k in tc.kinds:
            _note(c.kinds, k, first_key)
        c.errors.update(tc.errors)
        c.exchanges = tc.exchanges
    sessions = [(first_seen[id(s)], s.life()) for s in tracker.sessions]
    # per-stream models are not needed any more: do not ship them to the driver
    savings.streams, savings._by_session = {}, {}
    return BrokerPart(broker, totals, tracker.broker_summaries(), sessions, notes,
                      list(enumerate(findings)), savings, first_key or (), files)


def merge(parts: list[BrokerPart], decode_report, cache_slots=None, cache_shards=None) -> Analysis:
    """The per-broker parts -> one Analysis, as analyze_items would have produced in one sequential pass."""
    parts = sorted(parts, key=lambda p: p.first_key)
    totals = _Totals()
    for p in parts:
        totals.merge(p.totals)
    files = _ordered(p.files for p in parts)  # as analyze_items: files that had exchanges, in request order
    decode = {}
    findings = []
    for rank, p in enumerate(parts):
        findings.extend(((f.sort_key, rank, i), f) for i, f in p.findings)
    if decode_report is not None:
        decode = decode_report.to_dict()
        if decode_report.gaps:
            gap = FindingsEngine(cache_slots, cache_shards)
            gap.capture_gap(", ".join(decode_report.files), None, None, None, None, decode_report.lost_bytes,
                            gaps=decode_report.gaps)
            findings.extend(((f.sort_key, len(parts), i), f) for i, f in enumerate(gap.finish(SessionTracker())))
    capture = totals.capture_summary(files, decode)
    sessions = sorted((s for p in parts for s in p.sessions), key=lambda ks: ks[0])
    return Analysis(
        capture=capture,
        brokers=tuple(sorted((b for p in parts for b in p.summaries), key=lambda b: b.broker)),
        clients=tuple(sorted(_merge_clients(parts), key=lambda c: (c.host, c.client_id or ""))),
        sessions=tuple(s for _k, s in sessions),
        findings=tuple(f for _k, f in sorted(findings, key=lambda kf: kf[0])),
        savings=_merge_savings([p.savings for p in parts]),
    )


def _ordered(dicts) -> tuple:
    first: dict = {}
    for d in dicts:
        for v, k in d.items():
            if v not in first or k < first[v]:
                first[v] = k
    return tuple(v for v, _k in sorted(first.items(), key=lambda vk: vk[1]))


def _merge_clients(parts: list[BrokerPart]) -> list[ClientSummary]:
    groups: dict[tuple, list[_Client]] = {}
    for p in parts:
        for ckey, c in p.clients.items():
            groups.setdefault(ckey, []).append(c)
    out = []
    for (host, client_id), cs in groups.items():
        versions, kinds, errors = Counter(), Counter(), Counter()
        for c in cs:
            versions.update(c.versions)
            kinds.update(c.kind_counts)
            errors.update(c.errors)
        out.append(ClientSummary(
            client_id=client_id, host=host, addresses=_ordered(c.addresses for c in cs),
            brokers=_ordered(c.brokers for c in cs), software=_ordered(c.software for c in cs),
            fetch_versions={f"v{v}": n for v, n in sorted(versions.items())},
            request_kinds={k: kinds[k] for k in _ordered(c.kinds for c in cs)},
            exchanges=sum(c.exchanges for c in cs), sessions=_ordered(c.sessions for c in cs),
            errors={str(k): v for k, v in sorted(errors.items())},
        ))  # fmt: skip
    return out


def _merge_savings(estimators: list[SavingsEstimator]) -> dict:
    """Savings state is per (client, broker) stream, so per-broker estimates add up to the one-pass estimate."""
    merged = SavingsEstimator()
    for e in estimators:
        merged.merge(e)
    return merged.result().to_json()
