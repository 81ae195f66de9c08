"""Findings about fetch traffic and partition errors: a broker that does not hold empty fetches for MaxWaitMs, a
client polling with MaxWait 0, a client re-fetching in a tight loop on errors, a partition that keeps failing.

Each is one aggregated finding per broker (MaxWait) or per client and broker (the others), with a count and the
first frames, from the evidence fetchtool.analysis.tracking.traffic and .partition_errors collected.
"""

from __future__ import annotations

from fetchtool.analysis.diagnosis.advice import SEVERITY, advice
from fetchtool.analysis.diagnosis.partition_codes import name_of, reaction
from fetchtool.analysis.model import Finding
from fetchtool.analysis.tracking.partition_errors import PartitionErrors
from fetchtool.analysis.tracking.traffic import EARLY_SHARE, RETRY_GAP_S, TrafficTracker

# Early empty answers a broker must give before it is called out: one-offs (a fetch offset past the high
# watermark after a leader change, DelayedFetch case F) never add up to this; an ignoring broker does in seconds.
MAX_WAIT_MIN_EARLY = 20
# Empty answers to MaxWait 0 fetches before a client is said to spin: a one-shot reader (kcat -e, a tool
# reading to the end) sends a handful; a poll loop sends them as fast as the round trip allows.
ZERO_WAIT_MIN_EMPTY = 20
# Re-fetches in one loop before it is a storm: a leader change costs a Java client one to three quick fetches
# (metadata refresh, position validation); ten in a row within RETRY_GAP_S each means no backoff at all.
STORM_REFETCHES = 10
# Error responses for one partition, never followed by a good one, before it "keeps failing": a transient error
# (leader change, restart) is answered by a metadata refresh and clears by the second or third fetch ...
PERSIST_MIN_ERRORS = 3
# ... and within seconds: Java refreshes metadata at once and caps its retry backoff at 1 s (retry.backoff.max.ms),
# so the same error from the same broker 5 s later is not a transition (and not a leader that moved elsewhere).
PERSIST_MIN_S = 5.0


def findings(traffic: TrafficTracker, perrors: PartitionErrors) -> list[Finding]:
    out: list[Finding] = []
    for broker, st in traffic.broker_stats().items():
        ev = traffic.early_first.get(broker)
        if ev is None or st.early < MAX_WAIT_MIN_EARLY or st.honoured is not False:
            continue
        first, frames, times = ev
        p50 = times.quantile(0.5)
        msg = (f"Broker {broker} answered {st.early:,} of {st.checked:,} empty fetches that asked to wait up to "
               f"{first.max_wait_ms} ms for data (MinBytes {first.min_bytes}) after a median {p50:.2f} ms, well "
               f"before MaxWaitMs: it does not hold empty fetches as Kafka does, so idle consumers poll it "
               f"continuously ({_rate(st)} fetches/s in all).")
        out.append(_finding("MAX_WAIT_IGNORED", first, msg, st.early, frames, client=False))
    for (host, client_id, broker), pair in traffic.pairs.items():
        who = f"Client {client_id or '?'} ({host})"
        if pair.zero_wait_empty >= ZERO_WAIT_MIN_EMPTY:
            msg = (f"{who} sent {pair.zero_wait:,} fetches with MaxWaitMs 0 to {broker}; {pair.zero_wait_empty:,} "
                   f"came back empty at once, so it polls in a loop instead of letting the broker wait for data.")
            out.append(_finding("MAX_WAIT_ZERO", pair.zero_first, msg, pair.zero_wait_empty, pair.zero_frames))
        if pair.loops:
            n, seconds, codes = pair.longest
            names = ", ".join(f"{name_of(c)} ({c})" for c in codes)
            msg = (f"{who} re-fetched from {broker} within {RETRY_GAP_S * 1000:.0f} ms of responses carrying "
                   f"{names}, {n + 1} fetches in {seconds:.2f} s in the longest loop ({pair.loops} loop(s), "
                   f"{pair.loop_fetches:,} re-fetches): no backoff between errors.")
            out.append(_finding("FETCH_ERROR_LOOP", pair.loop_first, msg, pair.loop_fetches, pair.loop_frames))
    out.extend(_persisting(perrors))
    return out


def _persisting(perrors: PartitionErrors) -> list[Finding]:
    """One finding per (client, broker, code) over the partitions that failed PERSIST_MIN_ERRORS times or more,
    over PERSIST_MIN_S or more, and never recovered."""
    groups: dict[tuple, list] = {}
    for (host, client_id, broker, _t, _p, code), c in perrors.counts.items():
        if c.count >= PERSIST_MIN_ERRORS and not c.recovered and _span(c) >= PERSIST_MIN_S:
            groups.setdefault((host, client_id, broker, code), []).append(c)
    out = []
    for (host, client_id, broker, code), cs in groups.items():
        cs.sort(key=lambda c: (c.first.ts if c.first.ts is not None else float("inf"), c.topic or c.topic_id or "",
                               c.partition))  # fmt: skip
        first = cs[0].first
        names = ", ".join(f"{c.topic or c.topic_id or '?'}-{c.partition}" for c in cs[:5])
        more = f" and {len(cs) - 5} more" if len(cs) > 5 else ""
        total = sum(c.count for c in cs)
        seconds = max(_span(c) for c in cs)
        msg = (f"{name_of(code)} ({code}) on {len(cs)} partition(s) ({names}{more}) from {broker} to "
               f"{client_id or '?'} ({host}), {total:,} times over {seconds:.0f} s, and this broker never answered "
               f"them without error afterwards; a client is expected to {reaction(code)}.")
        frames = sorted({f for c in cs for f in c.frames})[:20]
        out.append(_finding("PARTITION_ERROR_PERSISTS", first, msg, total, frames))
    return out


def _span(c) -> float:
    first = c.first.ts
    return 0.0 if first is None or c.last_ts is None else c.last_ts - first


def _rate(st) -> str:
    r = st.summary().fetches_per_s
    return "?" if r is None else f"{r:,.0f}"


def _finding(code: str, ex, message: str, count: int, frames, client: bool = True) -> Finding:
    """``client`` False: a broker's finding (it concerns every client of the broker, not the first one)."""
    return Finding(
        code=code, severity=SEVERITY[code], cause=None, client=ex.client if client else None,
        client_id=ex.client_id if client else None, broker=ex.broker, session_id=None, epoch=None, file=ex.file,
        request_frame=ex.request_frame, response_frame=ex.response_frame, ts=ex.ts, message=message,
        advice=advice(code), count=count, frames=tuple(f for f in frames if f is not None),
    )  # fmt: skip


__all__ = ["findings", "EARLY_SHARE", "MAX_WAIT_MIN_EARLY", "ZERO_WAIT_MIN_EMPTY", "STORM_REFETCHES",
           "PERSIST_MIN_ERRORS", "PERSIST_MIN_S"]  # fmt: skip
