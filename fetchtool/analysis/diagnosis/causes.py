"""Why a session error happened: causes for errors 70 and 71 from the capture's evidence, never from guesses.

Resolved at the end of the capture, because the evidence can come after the error (another session that
failed in the same broker restart, a concurrent request the broker processed first).

* FETCH_SESSION_ID_NOT_FOUND (70)
  - closed_by_client: the client (or anyone) closed the session with a full request before using it again.
  - broker_restart: the broker was lost with its whole cache (every connection with a request in flight cut at
    once, analysis.connections), or the client reconnected and every session on that broker that was used
    again failed on a new connection, all after the last success of any of them.
  - evicted: replaying the capture through Kafka's own cache (analysis.shadow, fetchtool.sessions) evicts the
    session before its error, stale or by size, for the same newcomer with every cache size the capture allows
    (or the one given by --cache-slots/--cache-shards).
  - unknown otherwise, with the cache sizes the capture allows and the evidence that would settle it.
* INVALID_FETCH_SESSION_EPOCH (71)
  - bad_wrap: the last accepted epoch was 2147483647 and the request carried 0 or a negative epoch.
  - concurrent_requests: another request of the session was in flight when this one was sent (or the broker
    answered through its "possible duplicate request" path, which echoes the session id).
  - duplicate_request: the same (session id, epoch) was sent before and had been answered or lost.
  - epoch_skip: the broker's expected epoch is known and the request carried another, never-sent epoch.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from operator import itemgetter

from fetchtool.exchange import Exchange
from fetchtool.sessions.metadata import MAX_INT

from fetchtool.analysis.diagnosis.shadow import Eviction, Verdict
from fetchtool.analysis.reports.timefmt import clock as _clock
from fetchtool.analysis.tracking.tracker import SentRequest, TrackedBroker, TrackedSession

LATER = 4  # requests of the same session after a 71 kept as evidence


@dataclass(slots=True)
class PendingError:
    """A session error waiting for its cause."""

    ex: Exchange
    session: TrackedSession
    expected_epoch: int | None
    prev_success: SentRequest | None
    prev_requests: tuple[SentRequest, ...]
    reconnected: bool
    later: list[SentRequest] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Cause:
    cause: str
    detail: str  # the evidence, as words for the finding's message
    evicted_by: TrackedSession | None = None
    eviction: Eviction | None = None


# -- 71 ------------------------------------------------------------------------------------------------------
def epoch_cause(p: PendingError) -> Cause:
    ex = p.ex
    epoch = ex.session_epoch
    last = p.prev_success
    if last is not None and last.epoch == MAX_INT and epoch is not None and epoch <= 0:
        return Cause("bad_wrap", f"the previous accepted epoch was {MAX_INT} (frame {last.request_frame}) and the "
                                 f"client sent {epoch} instead of 1")  # fmt: skip
    same = [r for r in (*p.prev_requests, *p.later) if r.epoch == epoch and r.request_frame != ex.request_frame]
    for other in same:
        if _overlap(other, ex):
            return Cause("concurrent_requests", f"the same session sent epoch {other.epoch} at frame "
                                                f"{other.request_frame} while this request was in flight")  # fmt: skip
    for other in p.prev_requests + tuple(p.later):
        if other.request_frame != ex.request_frame and _overlap(other, ex):
            return Cause("concurrent_requests", f"another request of the session (epoch {other.epoch}, frame "
                                                f"{other.request_frame}) was in flight at the same time")  # fmt: skip
    earlier = [r for r in p.prev_requests if r.epoch == epoch]
    if earlier:
        o = earlier[-1]
        if o.response_frame is None:
            how = "its response was never captured (lost)"
        elif o.error_code:
            how = f"it was answered with error {o.error_code} at frame {o.response_frame}"
        else:
            how = f"the broker answered it at frame {o.response_frame}"
        return Cause("duplicate_request", f"epoch {epoch} was already sent at frame {o.request_frame} and {how}")
    if ex.response_session_id and ex.response_session_id == ex.session_id:
        return Cause("concurrent_requests", "the broker answered through its 'possible duplicate request' path "
                                            "(error with the session id echoed): another request raced this one")
    if p.expected_epoch is not None:
        return Cause("epoch_skip", f"the broker expected epoch {p.expected_epoch} and the client sent {epoch}")
    return Cause("unknown", "the capture does not show this session's earlier requests, so the epoch the broker "
                            "expected is unknown; a capture starting earlier would settle it")  # fmt: skip


def _overlap(other: SentRequest, ex) -> bool:
    """Were both requests outstanding at the same time (one sent before the other's response arrived)?"""
    if other.file != ex.file or other.request_frame is None or ex.request_frame is None:
        return False
    if other.request_frame < ex.request_frame:
        return other.response_frame is not None and other.response_frame > ex.request_frame
    return ex.response_frame is not None and ex.response_frame > other.request_frame


# -- 70 ------------------------------------------------------------------------------------------------------
class NotFoundResolver:
    """Causes for FETCH_SESSION_ID_NOT_FOUND on one analysis (all brokers)."""

    def __init__(self, brokers: dict[str, TrackedBroker], sessions: list[TrackedSession],
                 cache_slots: int | None, cache_shards: int | None) -> None:  # fmt: skip
        self.brokers = brokers
        self.by_broker: dict[str, list[TrackedSession]] = {}
        for s in sessions:
            self.by_broker.setdefault(s.broker, []).append(s)
        self.slots = cache_slots
        self.verdicts: dict[str, Verdict] = {}  # broker -> its shadow cache (set before causes are asked)
        self.losses: dict[str, list] = {}  # broker -> BrokerLoss, from its connections (analysis.connections)
        self._peers: dict[str, tuple] = {}
        self._restarts: dict[tuple[str, int, int], Cause | None] = {}
        self._by_last_request: dict[str, list[tuple[float, TrackedSession]]] = {}

    def cause(self, p: PendingError) -> Cause:
        """The cause, once the shadow caches are in ``verdicts``."""
        first = self.cause_before_cache(p)
        if first is not None:
            return first
        s = p.session
        evicted = self._evicted(p)
        if evicted is not None:
            return evicted
        if p.prev_success is None:
            return Cause("unknown", "the capture holds no successful request of this session; a capture covering "
                                    "its creation and last success would settle it" + self.unknown_hint(s.broker))
        hint = "--cache-slots/--cache-shards (the broker's cache size)" if self.slots is None else "a longer capture"
        verdict = self.verdicts.get(s.broker)
        if verdict is not None and not verdict.shapes:
            hint = ("the broker's cache settings (--cache-slots, --cache-shards, and --eviction-ms if it is not "
                    "Apache Kafka's 120 s)")
        since = f"its last successful request at frame {p.prev_success.request_frame}"
        refused = self.brokers[s.broker].refused
        if refused and self.slots is None:
            # A refusal proves the cache was full at that moment, not that this session was the one evicted.
            return Cause("unknown", f"the broker refused {refused} new session(s) (its cache was full), so an "
                                    f"eviction since {since} is likely, but the capture does not tell which creation "
                                    f"evicted it{self.unknown_hint(s.broker)}; {hint} or the broker's eviction "
                                    "metric would settle it")  # fmt: skip
        return Cause("unknown", f"no restart, close or eviction by Kafka's rules is visible between {since} and this "
                                f"error{self.unknown_hint(s.broker)}; {hint} or the broker's eviction metric would "
                                "settle it")  # fmt: skip

    def cause_before_cache(self, p: PendingError) -> Cause | None:
        """The causes that need no cache model: a close by the client, a broker restart."""
        s, ex = p.session, p.ex
        if s.closed_ts is not None and ex.ts is not None and s.closed_ts <= ex.ts:
            return Cause("closed_by_client", f"session {s.session_id} was closed by a full request at frame "
                                             f"{s.end_frame} before this incremental request")  # fmt: skip
        if s.end_reason == "every partition was forgotten":
            return Cause("closed_by_client", f"the broker dropped session {s.session_id} at frame {s.end_frame} "
                                             "because the client forgot every partition")  # fmt: skip
        for loss in self.losses.get(s.broker, ()):
            born = s.created_ts if s.created_ts is not None else float("-inf")
            if born <= loss.last_answer < (ex.ts or 0):
                back = f"; it answered again {loss.back - loss.last_answer:.1f} s later" if loss.back else ""
                return Cause("broker_restart", f"its broker was lost with its whole cache after "
                                               f"{_clock(loss.last_answer)}: every connection with a request in "
                                               f"flight ({len(loss.connections)}) was cut at once{back}")  # fmt: skip
        return self._restart(p)

    # broker_restart: the whole cache vanished at once, after the connections were re-established.
    def _restart(self, p: PendingError) -> Cause | None:
        s = p.session
        last_ok = s.last_success
        if not s.error_conn_changed or last_ok is None or last_ok.ts is None or s.error_ts is None:
            return None
        since, failed = last_ok.ts, s.error_ts
        peers, errors, last_oks = self._restart_peers(s.broker)
        # The group is the peers failing since `since` and last successful by `failed`: two cuts of sorted
        # lists name it, so the errors of one restart (which share their group) are judged once.
        key = (s.broker, bisect_left(errors, since), bisect_right(last_oks, failed))
        if key not in self._restarts:
            self._restarts[key] = self._judge_restart(s.broker, [r for r in peers if r[1] >= since and r[0] <= failed])
        return self._restarts[key]

    def _judge_restart(self, broker: str, group: list[tuple[float, float, TrackedSession]]) -> Cause | None:
        if not group:  # a success after the session's first 70 (an id the capture shows reused): no window
            return None
        window_start = max(last_ok for last_ok, _error, _t in group)
        window_end = min(error for _last_ok, error, _t in group)
        if window_start > window_end:
            return None
        members = {id(t) for _last_ok, _error, t in group}
        for last_request, t in self._latest_first(broker):
            if last_request <= window_end:
                break  # none of the rest was used after the window: none can show that the cache survived
            if id(t) in members:
                continue
            created = t.created_ts if t.created_ts is not None else float("-inf")
            if created > window_start or (t.closed_ts is not None and t.closed_ts <= window_start):
                continue
            return None  # a session from before survived: the broker kept its cache
        n = len(group)
        return Cause("broker_restart", f"{'all ' + str(n) + ' sessions' if n > 1 else 'the only session'} on "
                                       f"{broker} failed at once after the clients reconnected")  # fmt: skip

    # Built once per broker: the sessions' state is final when the causes are resolved.
    def _restart_peers(self, broker: str) -> tuple[list[tuple[float, float, TrackedSession]], list[float], list[float]]:
        """(last success, first 70, session) of the broker's sessions that failed with 70 on a new connection
        after a success, with their first-70 times and their last-success times, each sorted."""
        peers = self._peers.get(broker)
        if peers is None:
            rows = [(t.last_success.ts, t.error_ts, t) for t in self.by_broker[broker]
                    if t.error_ts is not None and t.error_conn_changed and t.last_success is not None
                    and t.last_success.ts is not None]  # fmt: skip
            peers = self._peers[broker] = (rows, sorted(r[1] for r in rows), sorted(r[0] for r in rows))
        return peers

    def _latest_first(self, broker: str) -> list[tuple[float, TrackedSession]]:
        """(last request, session) of the broker's sessions, latest first."""
        order = self._by_last_request.get(broker)
        if order is None:
            order = self._by_last_request[broker] = sorted(
                ((t.last_request_ts, t) for t in self.by_broker[broker] if t.last_request_ts is not None),
                key=itemgetter(0), reverse=True)  # fmt: skip
        return order

    # evicted: the shadow cache (analysis.shadow) replayed Kafka's own eviction rule over the capture.
    def _evicted(self, p: PendingError) -> Cause | None:
        s = p.session
        verdict = self.verdicts.get(s.broker)
        if verdict is None or s.error_ts is None:
            return None
        e = verdict.evictions.get(s)
        if e is None or e.t_ms > int(s.error_ts * 1000):
            return None
        return Cause("evicted", eviction_detail(e, verdict), e.evictor, e)

    def unknown_hint(self, broker: str) -> str:
        verdict = self.verdicts.get(broker)
        if verdict is None:
            return ""
        return f"; replaying the capture through Kafka's cache, {verdict.bounds()}"


def eviction_detail(e: Eviction, verdict: Verdict) -> str:
    """Why Kafka evicted e.victim, in words: stale (its client left it idle) or by size (for whom)."""
    n = e.evictor
    assert isinstance(n, TrackedSession), "the tracker's cache events name its own sessions (analysis.shadow keys)"
    if verdict.told:
        shape = f"its cache of {verdict.shapes[0].describe()}"
    else:
        shape = f"every cache size that fits the capture ({verdict.bounds().removesuffix(' fit the capture')})"
    newcomer = (f"session {n.session_id} was created at frame {n.created_response_frame} for "
                f"{n.client_id or '?'}@{n.client} ({e.evictor_size} partition(s))")
    if e.reason == "stale":
        return (f"the broker evicted it as stale: its client had not used it for {e.idle_ms / 1000:.1f} s (over "
                f"Kafka's 120 s) when {newcomer} in its shard, by {shape}")
    why = "a follower's priority" if e.reason == "privileged" else "more partitions"
    return (f"the broker evicted it ({e.victim_size} partition(s)) to make room in its full shard, by {shape}: "
            f"{newcomer}, with {why}")
