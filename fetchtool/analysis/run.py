"""The analysis pipeline: decode -> track sessions -> findings -> (savings) -> one Analysis object.

Streaming: exchanges are consumed one by one and dropped; only per-session and per-client state is kept.
`analyze_items` is the core (any iterable of Exchange / OrphanResponse, e.g. from another engine);
`analyze_capture` adds the decoder at the edge.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterable
from dataclasses import replace

from fetchtool.exchange import FETCH_SNAPSHOT, Exchange

from .findings import FindingsEngine
from .model import Analysis, BrokerSummary, CaptureSummary, Finding
from .tracker import SessionTracker


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
            self.records += sum(p.records_bytes for p in ex.response_partitions)


class _SavingsTap:
    """Feeds fetchtool.analysis.savings when that module exists (it is written separately).

    Expected API (either): `SavingsEstimator()` with `.feed(exchange)` and `.result() -> dict`, or a function
    `estimate(exchanges) -> dict` (then exchanges would have to be kept, so the estimator form is preferred).
    """

    def __init__(self) -> None:
        self.estimator = None
        if importlib.util.find_spec("fetchtool.analysis.savings") is None:
            return
        try:
            mod = importlib.import_module("fetchtool.analysis.savings")
            cls = getattr(mod, "SavingsEstimator", None)
            self.estimator = cls() if cls is not None else None
        except Exception:  # noqa: BLE001 - a broken optional module must not break the analysis
            self.estimator = None

    def feed(self, ex: Exchange) -> None:
        if self.estimator is not None:
            self.estimator.feed(ex)

    def result(self) -> dict:
        if self.estimator is None:
            return {}
        try:
            out = self.estimator.result()
            return out.to_json() if hasattr(out, "to_json") else dict(out)
        except Exception:  # noqa: BLE001
            return {}


def analyze_items(items: Iterable, *, files: Iterable[str] = (), cache_slots: int | None = None,
                  cache_shards: int | None = None, decode_report=None) -> Analysis:  # fmt: skip
    """Exchanges (and OrphanResponses) in request order -> Analysis."""
    tracker = SessionTracker()
    engine = FindingsEngine(cache_slots, cache_shards)
    totals = _Totals()
    savings = _SavingsTap()
    seen_files: dict[str, None] = dict.fromkeys(files)
    for it in items:
        if isinstance(it, Exchange):
            seen_files.setdefault(it.file, None)
            totals.add(it)
            engine.observe(tracker.feed(it))
            savings.feed(it)
        else:  # OrphanResponse: a response whose request is not in the capture
            engine.request_missing(getattr(it, "file", ""), it.frame, it.ts, it.client, it.broker)
    decode = {}
    if decode_report is not None:
        decode = decode_report.to_dict()
        if decode_report.gaps:
            # The decode report counts gaps, not where they are: one finding for the whole run.
            engine.capture_gap(", ".join(decode_report.files), None, None, None, None, decode_report.lost_bytes,
                               gaps=decode_report.gaps)
    findings = engine.finish(tracker)
    capture = CaptureSummary(
        files=tuple(seen_files), exchanges=totals.exchanges, fetch_exchanges=totals.fetch,
        snapshot_exchanges=totals.snapshot, first_ts=totals.first_ts, last_ts=totals.last_ts,
        request_bytes=totals.request_bytes, response_bytes=totals.response_bytes, records_bytes=totals.records,
        decode=decode,
    )  # fmt: skip
    return Analysis(
        capture=capture,
        brokers=tuple(sorted((_within_cache(b, cache_slots) for b in tracker.broker_summaries()),
                             key=lambda b: b.broker)),
        clients=tuple(sorted(tracker.client_summaries(), key=lambda c: (c.host, c.client_id or ""))),
        sessions=tuple(tracker.session_lives()),
        findings=tuple(findings),
        savings=savings.result(),
    )


def analyze_capture(paths, *, ports=None, cache_slots: int | None = None, cache_shards: int | None = None) -> Analysis:
    """Decode capture files and analyse them. Raises CaptureError (one line) only when nothing could be read."""
    from fetchtool.decoder import decode_capture

    run = decode_capture(paths, ports)
    return analyze_items(run, cache_slots=cache_slots, cache_shards=cache_shards, decode_report=run.report)


def filtered(analysis: Analysis, client: str | None = None, broker: str | None = None) -> Analysis:
    """Keep what concerns one client (client id, host or ip:port) and/or one broker (ip:port or host)."""
    if not client and not broker:
        return analysis

    def client_ok(address: str | None, client_id: str | None) -> bool:
        if not client:
            return True
        if client_id is not None and client == client_id:
            return True
        return address is not None and (address == client or address.rsplit(":", 1)[0] == client)

    def broker_ok(b: str | None) -> bool:
        return not broker or (b is not None and (b == broker or b.rsplit(":", 1)[0] == broker))

    clients = tuple(
        c for c in analysis.clients
        if (not client or client == c.client_id or client == c.host or client in c.addresses)
        and (not broker or any(broker_ok(b) for b in c.brokers))
    )  # fmt: skip
    sessions = tuple(s for s in analysis.sessions if client_ok(s.client, s.client_id) and broker_ok(s.broker))
    findings: tuple[Finding, ...] = tuple(
        f for f in analysis.findings
        if (not client or client_ok(f.client, f.client_id)) and (not broker or broker_ok(f.broker))
    )  # fmt: skip
    brokers = tuple(b for b in analysis.brokers if broker_ok(b.broker))
    return Analysis(analysis.capture, brokers, clients, sessions, findings, analysis.savings)


def _within_cache(b: BrokerSummary, cache_slots: int | None) -> BrokerSummary:
    """A capture cannot see an eviction until the victim's next fetch fails, so it may count an evicted session as
    still live; given the cache size, a broker never holds more than its slots."""
    if cache_slots is None or b.max_live_sessions <= cache_slots:
        return b
    return replace(b, max_live_sessions=cache_slots)
