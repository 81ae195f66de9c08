"""How each client uses the sessions a broker offers, per client and broker: a client that keeps asking for new
sessions without using them (SESSION_CHURN), refusals (CACHE_FULL on a broker shown to keep sessions,
SESSIONS_NOT_GRANTED on one that never does), sessionless clients where the savings estimate shows what
sessions would save (SESSIONLESS_CLIENT), and a broker that drops a session without an error
(SESSION_DROPPED_WITHOUT_ERROR).

Advice about a broker's cache is given only where the capture shows the broker keeps sessions
(tracking.grants_session): refusals from a broker that never granted one say nothing about its cache size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fetchtool.exchange import Exchange

from fetchtool.analysis.diagnosis.build import MAX_FRAMES, Agg, finding
from fetchtool.analysis.model import CLOSE, FULL, FULL_CREATE, INCREMENTAL, SESSIONLESS, Finding
from fetchtool.analysis.reports.units import human
from fetchtool.analysis.tracking.tracker import Observation, SessionTracker

CHURN_REQUESTS = 5  # session-creating fetches (granted or refused) by one client on one broker before churn is named
# A sessionless client is named when sessions would save this share of its fetch bytes, and at least this much
# per fetch (a few partition entries each way: below that, e.g. one partition, a session is not worth a slot).
SESSIONLESS_SHARE = 0.2
SESSIONLESS_BYTES_PER_FETCH = 100
AFTER_REFUSAL = "after_refusal"  # SESSIONLESS_CLIENT's cause: the client stopped asking once refused a session


@dataclass(slots=True)
class _Use:
    """One client's requests to one broker, as far as sessions go."""

    first: object  # the first exchange
    created: int = 0
    incremental: int = 0
    unused: int = 0  # granted sessions the client never sent an incremental fetch on (counted when it moves on)
    sessionless: int = 0
    sessionless_max_partitions: int = 0
    asking_frames: list[int] = field(default_factory=list)  # session-creating requests, granted or refused
    sessionless_frames: list[int] = field(default_factory=list)
    first_sessionless: Exchange | None = None  # where SESSIONLESS_CLIENT points
    # The first refused session-creating request, if it came before any sessionless fetch (None: not refused, or
    # sessionless first): a client whose sessionless fetches follow a refusal gave up asking
    refused_first: Exchange | None = None


class SessionUse:
    """Fed the tracker's observations one by one (sans-IO); `findings` at the end of the capture."""

    def __init__(self) -> None:
        self.uses: dict[tuple, _Use] = {}  # (client host, client id, broker)
        self.refused: dict[tuple, Agg] = {}
        self.dropped: dict[tuple, Agg] = {}
        # (broker, connection) -> [session id, used, _Use]: the last session granted on the connection
        self.open: dict[tuple, list] = {}

    def observe(self, obs: Observation) -> None:
        ex, kind = obs.exchange, obs.kind
        key = (obs.client.host, obs.client.client_id, ex.broker)
        use = self.uses.get(key)
        if use is None:
            use = self.uses[key] = _Use(ex)
        conn = (ex.broker, ex.conn)
        if kind in (FULL_CREATE, FULL):
            held = self.open.pop(conn, None)
            if held is not None and not held[1]:
                held[2].unused += 1
            if kind == FULL_CREATE:
                use.created += 1
                self.open[conn] = [ex.response_session_id, False, use]
            if (kind == FULL_CREATE or obs.refused) and ex.request_frame is not None \
                    and len(use.asking_frames) < MAX_FRAMES:
                use.asking_frames.append(ex.request_frame)
        elif kind == INCREMENTAL:
            use.incremental += 1
            held = self.open.get(conn)
            if held is not None and held[0] == ex.session_id and ex.error_code == 0:
                held[1] = True
        elif kind == CLOSE:
            held = self.open.pop(conn, None)
            if held is not None and not held[1]:
                held[2].unused += 1
        elif kind == SESSIONLESS:
            if use.first_sessionless is None:
                use.first_sessionless = ex
            use.sessionless += 1
            if ex.partitions > use.sessionless_max_partitions:
                use.sessionless_max_partitions = ex.partitions
            if ex.request_frame is not None and len(use.sessionless_frames) < MAX_FRAMES:
                use.sessionless_frames.append(ex.request_frame)
        if obs.refused:
            if use.refused_first is None and not use.sessionless:
                use.refused_first = ex
            agg = self.refused.get(key)
            if agg is None:
                agg = self.refused[key] = Agg(ex)
            agg.add(ex.request_frame)
        if obs.dropped:
            agg = self.dropped.get(key)
            if agg is None:
                agg = self.dropped[key] = Agg(ex)
            agg.add(ex.response_frame)

    def connection_ended(self, broker: str, conn: int) -> None:
        """A closed connection can use its session no more: a session it never used is counted now, as at the
        end of the capture (memory: one entry per open connection, not per connection ever seen)."""
        held = self.open.pop((broker, conn), None)
        if held is not None and not held[1]:
            held[2].unused += 1

    def findings(self, tracker: SessionTracker, savings_by_pair: dict | None) -> list[Finding]:
        """``savings_by_pair``: (host, client id, broker) -> [potential bytes, fetch bytes] from the savings
        estimate (savings.estimator.SavingsEstimator.per_pair); None when no estimate was made."""
        out: list[Finding] = []
        for held in self.open.values():  # sessions still held at the end of the capture
            if not held[1]:
                held[2].unused += 1
        self.open.clear()
        for key, use in self.uses.items():
            host, client_id, broker = key
            who = f"{client_id or '?'} ({host})"
            refused = self.refused[key].count if key in self.refused else 0  # the CACHE_FULL aggregate counts them
            asked = use.created + refused
            # churn: granted sessions mostly left unused while the client keeps asking (a client that used its
            # session and is then refused is a full cache, not churn)
            if asked >= CHURN_REQUESTS and use.incremental * 10 <= asked and use.unused >= max(1, use.created // 2):
                msg = (f"Client {who} asked {broker} for a new fetch session {asked:,} times ({use.created:,} "
                       f"granted, {refused:,} refused) and sent {use.incremental:,} incremental fetches: "
                       f"{use.unused:,} granted session(s) were never used, each holding a cache slot for nothing.")
                out.append(finding("SESSION_CHURN", None, use.first, msg, use.unused, use.asking_frames))
            saving = (savings_by_pair or {}).get((host, client_id, broker))
            if (use.sessionless and saving and saving[1] and saving[0] >= SESSIONLESS_SHARE * saving[1]
                    and saving[0] >= SESSIONLESS_BYTES_PER_FETCH * use.sessionless):
                potential, total = saving
                msg = (f"Client {who} sent {use.sessionless:,} sessionless fetches to {broker}, listing up to "
                       f"{use.sessionless_max_partitions:,} partitions each, every partition in both directions every "
                       f"time; with an incremental fetch session it would send {human(potential)} less, "
                       f"{potential / total:.0%} of its fetch bytes to this broker (savings estimate).")
                cause = None
                refusal = use.refused_first
                if refusal is not None:
                    cause = AFTER_REFUSAL
                    why = ("a full cache: CACHE_FULL" if tracker.brokers[broker].granted
                           else "the broker grants none: SESSIONS_NOT_GRANTED")
                    at = f" at frame {refusal.request_frame}" if refusal.request_frame is not None else ""
                    msg += (f" It asked for a session first and was refused (session id 0 to its ({refusal.session_id},"
                            f" {refusal.session_epoch}) fetch{at}, {why}); its sessionless fetches followed that "
                            "refusal.")
                out.append(finding("SESSIONLESS_CLIENT", cause, use.first_sessionless, msg, use.sessionless,
                                   use.sessionless_frames))
        for (host, client_id, broker), agg in self.refused.items():
            if tracker.brokers[broker].granted:
                msg = (f"Broker {broker} answered {agg.count:,} session-creating fetch(es) from {client_id or '?'} "
                       f"({host}) with session id 0 while it kept sessions for others: no free slot in its fetch "
                       "session cache.")
                out.append(finding("CACHE_FULL", None, agg.ex, msg, agg.count, agg.frames))
        for broker, b in tracker.brokers.items():
            if b.granted or not b.refused:
                continue
            aggs = [a for (_h, _c, br), a in self.refused.items() if br == broker]
            first = min(map(_exchange, aggs), key=lambda ex: ex.ts or 0)
            frames = [f for a in aggs for f in a.frames][:MAX_FRAMES]
            msg = (f"Broker {broker} never granted a fetch session: all {b.refused:,} session-creating fetches from "
                   f"{len(aggs)} client(s) got session id 0, so every fetch is a full fetch.")
            out.append(finding("SESSIONS_NOT_GRANTED", None, first, msg, b.refused, frames))
        for (host, client_id, broker), agg in self.dropped.items():
            ex = _exchange(agg)
            msg = (f"Broker {broker} answered {agg.count:,} incremental fetch(es) from {client_id or '?'} ({host}) "
                   f"with session id 0 and no error while the session still held partitions (first: session "
                   f"{ex.session_id}, epoch {ex.session_epoch}): Kafka keeps such a session, and answers one it "
                   "does not know with FETCH_SESSION_ID_NOT_FOUND (70).")
            out.append(finding("SESSION_DROPPED_WITHOUT_ERROR", None, ex, msg, agg.count, agg.frames))
        return out



def _exchange(agg: Agg) -> Exchange:
    """The first exchange of one of SessionUse's aggregates (Agg holds any anchor; these are all exchanges)."""
    assert isinstance(agg.ex, Exchange), "SessionUse makes its aggregates from exchanges only"
    return agg.ex
