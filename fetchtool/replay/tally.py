"""Counters shared by simulate and replay: the TOTALS object of the design.md JSON contracts.

Also the captured side of every comparison: what the capture itself shows, per broker and per client stream,
counted the same way (sessions created, inferred evictions, errors, incremental share, bytes).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from fetchtool.replay.plan import ReplayPlan

FETCH_SESSION_ID_NOT_FOUND = 70


@dataclass(slots=True)
class Tally:
    requests: int = 0
    responses: int = 0
    sessions_created: int = 0
    evictions: int = 0  # simulate: sessions of this scope evicted; captured: inferred from 70 on a live session
    errors: Counter = field(default_factory=Counter)  # top-level error code -> count
    incremental: int = 0  # requests answered as incremental (error NONE)
    request_bytes: int = 0
    response_bytes: int = 0
    records_bytes: int = 0

    def add(self, other: Tally) -> None:
        self.requests += other.requests
        self.responses += other.responses
        self.sessions_created += other.sessions_created
        self.evictions += other.evictions
        self.errors.update(other.errors)
        self.incremental += other.incremental
        self.request_bytes += other.request_bytes
        self.response_bytes += other.response_bytes
        self.records_bytes += other.records_bytes

    @property
    def incremental_share(self) -> float:
        return self.incremental / self.requests if self.requests else 0.0

    def to_json(self) -> dict:
        return {
            "requests": self.requests,
            "responses": self.responses,
            "sessions_created": self.sessions_created,
            "evictions": self.evictions,
            "errors": {str(code): n for code, n in sorted(self.errors.items()) if n},
            "incremental_share": round(self.incremental_share, 4),
            "request_bytes": self.request_bytes,
            "response_bytes": self.response_bytes,
            "records_bytes": self.records_bytes,
        }


@dataclass(slots=True)
class CapturedCounts:
    totals: Tally
    brokers: dict[str, Tally]
    streams: list[Tally]  # by stream index


def totals_by_broker(plan: ReplayPlan, streams: list[Tally]) -> tuple[Tally, dict[str, Tally]]:
    """The sum of every stream's tally, and the sums per broker (``streams`` by stream index)."""
    totals = Tally()
    brokers: dict[str, Tally] = {}
    for stream, tally in zip(plan.streams, streams):
        brokers.setdefault(stream.broker, Tally()).add(tally)
        totals.add(tally)
    return totals, brokers


def captured_counts(plan: ReplayPlan) -> CapturedCounts:
    """What the capture shows, counted like the simulation counts."""
    streams: list[Tally] = []
    live: set[tuple[str, int]] = set()  # (broker, session id) seen created or used successfully
    evicted: set[tuple[str, int]] = set()
    for stream in plan.streams:
        t = Tally()
        for f in stream.fetches:
            t.requests += 1
            t.request_bytes += f.request_bytes or 0
            if f.error_code is None:
                continue
            t.responses += 1
            t.response_bytes += f.response_bytes or 0
            t.records_bytes += f.records_bytes or 0
            if f.error_code:
                t.errors[f.error_code] += 1
            key = (stream.broker, f.session_id)
            if f.error_code == FETCH_SESSION_ID_NOT_FOUND and f.incremental and key in live and key not in evicted:
                evicted.add(key)
                t.evictions += 1  # charged to the client whose session vanished
            if f.error_code == 0:
                if f.epoch == 0 and f.response_session_id:
                    t.sessions_created += 1
                    live.add((stream.broker, f.response_session_id))
                elif f.incremental:
                    t.incremental += 1
                    live.add(key)
        streams.append(t)
    return CapturedCounts(*totals_by_broker(plan, streams), streams)
