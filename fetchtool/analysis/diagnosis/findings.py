"""Findings: what went wrong (or is wasteful) in a capture, each with its evidence, frames, cause and advice.

`FindingsEngine.observe(observation)` takes the tracker's observations one by one (sans-IO); capture-quality
events (orphan responses, TCP gaps) come in through `request_missing` / `capture_gap`. `finish(tracker)` resolves
the causes that need later evidence and returns the findings, most severe first. Repetitive findings (a
refused session on every fetch, a sessionless client) are aggregated per client and broker, with a count and the
first frames, so a capture gives one finding per problem, not one alarm per fetch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from fetchtool.exchange import Exchange
from fetchtool.sessions.errors import error_name

from fetchtool.analysis.diagnosis.advice import SEVERITY, advice
from fetchtool.analysis.diagnosis.build import MAX_FRAMES, Agg, finding
from fetchtool.analysis.diagnosis.session_use import SessionUse
from fetchtool.analysis.diagnosis.causes import LATER, NotFoundResolver, PendingError, epoch_cause
from fetchtool.analysis.model import ALIVE, CLOSED, EVICTED, INCREMENTAL, LOST, SESSIONLESS, SNAPSHOT, Finding
from fetchtool.analysis.tracking.connections import broker_losses
from fetchtool.analysis.tracking.kraft import is_kraft_voter_fetch
from fetchtool.sessions.cache import DEFAULT_EVICTION_MS

from fetchtool.analysis.diagnosis.shadow import infer
from fetchtool.analysis.tracking.cache_events import RESTART, CacheLog
from fetchtool.analysis.reports.timefmt import clock as _clock
from fetchtool.analysis.tracking.tracker import Observation, SessionTracker

STARVATION_RUNS = 5  # full responses in a row that leave out a partition with data
FULL_RESPONSE = 0.9  # a response whose records reach this share of MaxBytes is "full" (KIP-74)
IN_FLIGHT_GRACE = 1.0  # seconds past MaxWaitMs before an unanswered request at the capture's end counts
LAST_ON_CONNECTION = "last_on_connection"  # RESPONSE_MISSING's cause: nothing was answered after it on its connection
SNAPSHOT_ERRORS = {98: "SNAPSHOT_NOT_FOUND", 99: "POSITION_OUT_OF_RANGE"}  # KIP-630 codes the engine does not name


def _last_on_its_connection(state, ex) -> bool:
    """Whether ``ex`` is among the unanswered requests its connection (tracking ConnectionState) ends with: none
    after them was answered on it. (The state is kept, open or closed, while it has requests in flight.)"""
    return (state is not None and state.in_flight > 0 and state.cut_request_frame is not None
            and ex.request_frame is not None and ex.request_frame >= state.cut_request_frame)


@dataclass(frozen=True, slots=True)
class _FirstSeen:
    """Where a capture-quality finding (REQUEST_MISSING, CAPTURE_GAP) was first seen: its Agg's anchor."""

    frame: int | None
    ts: float | None


@dataclass(slots=True)
class _Starvation:
    """Per (client, broker): partitions left out of full responses (KIP-74), watched after the first full one."""

    watch: dict | None = None  # partition -> [fetch_offset, high_watermark, runs, first_frame, topic, partition]
    starved: dict = field(default_factory=dict)  # partition -> (exchange, first frame, topic, partition)


class FindingsEngine:
    def __init__(self, cache_slots: int | None = None, cache_shards: int | None = None,
                 eviction_ms: int = DEFAULT_EVICTION_MS) -> None:
        self.cache_slots = cache_slots
        self.cache_shards = cache_shards
        self.eviction_ms = eviction_ms  # Kafka's is 120 s (not a config); other brokers may differ
        self.findings: list[Finding] = []
        self.pending_70: list[PendingError] = []
        self.pending_71: list[PendingError] = []
        self._watch: dict[tuple, list[PendingError]] = {}
        self.session_use = SessionUse()
        self._starved: dict[tuple, _Starvation] = {}
        self._missing: dict[tuple, list] = {}
        self._over_max: dict[tuple, Agg] = {}
        self._snapshot_next: dict[tuple, int] = {}
        self._snapshot_errors: dict[tuple, Agg] = {}
        self._quality: dict[tuple, Agg] = {}
        self._started_mid_message: list = []  # protocol.report.MidMessageStart
        self._cut: set[tuple[str, int]] = set()  # (broker, connection) cut with a lost broker
        self.last_ts: float | None = None

    # -- streaming -----------------------------------------------------------------------------------------
    def observe(self, obs: Observation) -> None:
        ex = obs.exchange
        ts = ex.response_ts or ex.ts
        if ts is not None and (self.last_ts is None or ts > self.last_ts):
            self.last_ts = ts
        if ex.response_partitions is None and ex.error_code is None:
            self._missing.setdefault((ex.client, ex.broker), []).append(ex)
        if obs.kind == SNAPSHOT:
            self._snapshot(obs)
            return
        s = obs.session
        if s is not None and obs.kind == INCREMENTAL:
            waiting = self._watch.get(s.key)
            if waiting:
                for p in waiting:
                    if p.ex is not ex and len(p.later) < LATER:
                        p.later.append(s.recent[-1])
                self._watch[s.key] = [p for p in waiting if len(p.later) < LATER]
        err = ex.error_code
        if err and s is not None and obs.kind == INCREMENTAL:
            pending = PendingError(ex, s, obs.expected_epoch, obs.prev_success, obs.prev_requests, obs.reconnected)
            if err == 70:
                self.pending_70.append(pending)
            elif err == 71:
                self.pending_71.append(pending)
                self._watch.setdefault(s.key, []).append(pending)
            elif err == 106:
                self._topic_id_error(pending)
        if obs.kind == SESSIONLESS and is_kraft_voter_fetch(ex):
            return  # a KRaft voter's Fetch: sessionless by design, no session finding applies
        self.session_use.observe(obs)
        if ex.response_partitions is not None and not err:
            pair_key = (obs.client.host, obs.client.client_id, ex.broker)
            self._response_size(ex, pair_key)
            self._starvation(ex, pair_key)

    def request_missing(self, file: str, frame: int | None, ts: float | None, client: str, broker: str) -> None:
        """A response whose request is not in the capture (REQUEST_MISSING)."""
        self._quality_event("REQUEST_MISSING", file, frame, ts, client, broker)

    def capture_gap(self, file: str, frame: int | None, ts: float | None, client: str | None, broker: str | None,
                    lost_bytes: int = 0, gaps: int = 1) -> None:  # fmt: skip
        """Bytes the capture lost on a Kafka connection (CAPTURE_GAP); `gaps` when reported as a total."""
        agg = self._quality_event("CAPTURE_GAP", file, frame, ts, client, broker)
        agg.count += gaps - 1
        agg.extra["lost_bytes"] = agg.extra.get("lost_bytes", 0) + lost_bytes

    def decode_quality(self, report) -> None:
        """What the decoder's report says about the capture itself: TCP gaps (counted, not located: one finding
        for the run) and connections whose capture began inside a message (one each)."""
        if report.gaps:
            self.capture_gap(", ".join(report.files), None, None, None, None, report.lost_bytes, gaps=report.gaps)
        for m in report.mid_message_starts:
            self._started_mid_message.append(m)

    def _quality_event(self, code, file, frame, ts, client, broker) -> Agg:
        key = (code, file, client, broker)
        agg = self._quality.get(key)
        if agg is None:
            agg = self._quality[key] = Agg(_FirstSeen(frame, ts))  # file, client, broker: in the key
        agg.add(frame)
        return agg

    # -- per-exchange detectors ----------------------------------------------------------------------------
    def _topic_id_error(self, p: PendingError) -> None:
        ex, s = p.ex, p.session
        ids = ex.api_version >= 13
        family = "v13+ (topic ids)" if ids else "v12 or older (topic names)"
        if s.uses_topic_ids is not None and not s.before_capture and s.uses_topic_ids != ids:
            used = sorted(v for v in s.versions_before if (v >= 13) == ids)
            if used:
                # The broker had accepted the request's family from this client before the session was created:
                # no upgrade in between, the client itself changed versions.
                cause = "client_version_switch"
                where = "on its new connection" if s.created_on_reconnect else "on its connection"
                msg = (f"Session {s.session_id} was created with Fetch v{s.created_version} {where} (frame "
                       f"{s.created_request_frame}), although this client had used Fetch v{used[-1]} with this "
                       f"broker before; this request is Fetch v{ex.api_version}, {family}, so the broker rejects it "
                       "with FETCH_SESSION_TOPIC_ID_ERROR. The client switched Fetch versions on its own"
                       + (" reconnect" if s.created_on_reconnect else "") + "; no upgrade is visible.")
            else:
                cause = "version_mismatch"
                msg = (f"Session {s.session_id} was created with Fetch v{s.created_version} but this request is "
                       f"Fetch v{ex.api_version}, {family}, so the broker rejects it with "
                       "FETCH_SESSION_TOPIC_ID_ERROR; the client had not used this Fetch version with this broker "
                       "before (an upgrade or downgrade of the broker or the client in between).")
        else:
            cause = "unknown"
            msg = (f"Fetch v{ex.api_version} request of session {s.session_id} got FETCH_SESSION_TOPIC_ID_ERROR; "
                   "the capture does not show the Fetch version that created the session.")
        self._add_ex("FETCH_SESSION_TOPIC_ID_ERROR", cause, ex, msg)

    def _response_size(self, ex, pair_key) -> None:
        if ex.api_key != 1 or ex.max_bytes is None or ex.api_version < 3:
            return
        total = 0
        first = 0
        for p in ex.response_partitions:
            if p.records_bytes:
                if not total:
                    first = p.records_bytes
                total += p.records_bytes
        # KIP-74: the first non-empty partition may return one whole batch beyond every limit.
        if total > max(ex.max_bytes, first):
            agg = self._over_max.get(pair_key)
            if agg is None:
                agg = self._over_max[pair_key] = Agg(ex, extra={"total": total, "max": ex.max_bytes})
            agg.add(ex.response_frame)

    def _starvation(self, ex, pair_key) -> None:
        if ex.api_key != 1 or not ex.max_bytes:
            return
        records = ex.records_bytes or 0
        full = records >= FULL_RESPONSE * ex.max_bytes
        st = self._starved.get(pair_key)
        if st is None:
            if not full:
                return  # nothing to watch until responses fill MaxBytes (keeps the common case cheap)
            st = self._starved[pair_key] = _Starvation()
        state = st.watch
        if state is None:
            state = st.watch = {}
        for p in ex.request_partitions:
            k = (p.topic_id or p.topic, p.partition)
            e = state.get(k)
            if e is None:
                state[k] = [p.fetch_offset, -1, 0, None, p.topic or p.topic_id, p.partition]
            else:
                e[0] = p.fetch_offset
        for p in ex.forgotten_partitions:
            state.pop((p.topic_id or p.topic, p.partition), None)
        served = set()
        for p in ex.response_partitions:
            k = (p.topic_id or p.topic, p.partition)
            e = state.get(k)
            if e is None:
                continue
            e[1] = p.high_watermark
            if p.records_bytes:
                e[2] = 0
                e[3] = None
                served.add(k)
        if not full:
            return
        for k, e in state.items():
            if k in served or e[1] <= e[0] or e[0] < 0:
                continue
            e[2] += 1
            if e[3] is None:
                e[3] = ex.response_frame
            if e[2] == STARVATION_RUNS and k not in st.starved:
                st.starved[k] = (ex, e[3], e[4], e[5])

    def _snapshot(self, obs: Observation) -> None:
        ex = obs.exchange
        if ex.response_partitions is None:
            return
        sent = {(p.topic_id or p.topic, p.partition): p for p in ex.request_partitions}
        for rp in ex.response_partitions:
            k = (rp.topic_id or rp.topic, rp.partition)
            rq = sent.get(k)
            name = f"{rp.topic or rp.topic_id}-{rp.partition}"
            tkey = (obs.client.host, obs.client.client_id, ex.broker, k)
            if rp.error_code:
                self._snapshot_error(ex, tkey + (rp.error_code,), f"FetchSnapshot of {name} failed with "
                                     f"{SNAPSHOT_ERRORS.get(rp.error_code) or error_name(rp.error_code)} ({rp.error_code}).")  # fmt: skip
                self._snapshot_next.pop(tkey, None)
                continue
            if rq is None:
                continue
            expected = self._snapshot_next.get(tkey)
            if expected is not None and rq.fetch_offset not in (expected, 0):
                self._snapshot_error(ex, tkey + ("position",), f"FetchSnapshot of {name} asked for position "
                                     f"{rq.fetch_offset} but the transfer had reached {expected}.")  # fmt: skip
            nxt = rp.log_start_offset + rp.records_bytes  # response Position + chunk
            if rp.high_watermark >= 0 and nxt >= rp.high_watermark:
                self._snapshot_next.pop(tkey, None)  # transfer complete
            else:
                self._snapshot_next[tkey] = nxt

    def _snapshot_error(self, ex, key, message) -> None:
        agg = self._snapshot_errors.get(key)
        if agg is None:
            agg = self._snapshot_errors[key] = Agg(ex, extra={"message": message})
        agg.add(ex.response_frame)

    # -- end of capture ------------------------------------------------------------------------------------
    def finish(self, tracker: SessionTracker, savings_by_pair: dict | Callable[[], dict] | None = None
               ) -> list[Finding]:
        """``savings_by_pair``: what sessionless clients would save (session_use.SessionUse.findings), or a
        function giving it, called only once everything else is found (the savings may still be under way in
        another process: analysis.run.savings_apart)."""
        resolver = NotFoundResolver(tracker.brokers, tracker.sessions, self.cache_slots, self.cache_shards)
        self._broker_losses(resolver, tracker)
        self._shadow_caches(resolver, tracker)
        evicted: dict[str, list] = {}
        for p in self.pending_70:
            c = resolver.cause(p)
            s = p.session
            if c.cause == "broker_restart" and s.end == LOST and s.end_reason == "FETCH_SESSION_ID_NOT_FOUND":
                s.end_reason = "broker restart"
            if c.cause == "evicted" and c.eviction is not None and c.eviction.reason != "stale":
                evicted.setdefault(s.broker, []).append((p, c))
            msg = (f"Incremental fetch of session {s.session_id} (epoch {p.ex.session_epoch}) got "
                   f"FETCH_SESSION_ID_NOT_FOUND: {c.detail}.")
            self._add_ex("FETCH_SESSION_ID_NOT_FOUND", c.cause, p.ex, msg, stale=c.cause == "evicted"
                         and c.eviction is not None and c.eviction.reason == "stale")
        for p in self.pending_71:
            c = epoch_cause(p)
            msg = (f"Incremental fetch of session {p.session.session_id} with epoch {p.ex.session_epoch} got "
                   f"INVALID_FETCH_SESSION_EPOCH: {c.detail}.")
            self._add_ex("INVALID_FETCH_SESSION_EPOCH", c.cause, p.ex, msg)
        self._eviction_pressure(evicted, tracker)
        pairs = savings_by_pair() if callable(savings_by_pair) else savings_by_pair
        self.findings += self.session_use.findings(tracker, pairs)
        self._starvation_findings()
        self._aggregates(tracker)
        return sorted(self.findings, key=lambda f: f.sort_key)

    def _broker_losses(self, resolver: NotFoundResolver, tracker: SessionTracker) -> None:
        """Brokers lost with their cache (analysis.connections): a finding each, their sessions ended, the shadow
        cache emptied, and the requests cut with them no longer blamed on the capture."""
        by_broker: dict[str, list] = {}
        for s in tracker.sessions:
            by_broker.setdefault(s.broker, []).append(s)
        for name, b in tracker.brokers.items():
            losses = broker_losses(name, list(b.connections.values()), self.last_ts, b.closed)
            if not losses:
                continue
            resolver.losses[name] = losses
            for loss in losses:
                b.cache_event(loss.last_answer, RESTART, 0, 0, False)
                self._cut.update((name, conn) for conn in loss.conns)
                lost = 0
                for s in by_broker.get(name, ()):
                    born = s.created_ts if s.created_ts is not None else float("-inf")
                    if born <= loss.last_answer and (s.end == ALIVE or (s.end in (CLOSED, LOST) and s.end_ts is not None
                                                                         and s.end_ts > loss.last_answer)):
                        s.end, s.end_frame, s.end_ts = LOST, None, loss.last_answer
                        s.end_reason = f"lost with its broker (every connection cut after {_clock(loss.last_answer)})"
                        lost += 1
                self.findings.append(self._loss_finding(loss, lost))

    def _loss_finding(self, loss, lost: int) -> Finding:
        first = min(loss.connections, key=lambda c: c.cut_request_ts or 0)
        clients = sorted({c.client_id or "?" for c in loss.connections})
        back = (f"it answered again {loss.back - loss.last_answer:.1f} s later, on new connections"
                if loss.back is not None else "it never answered again in the capture")
        names = ", ".join(clients[:6]) + (", ..." if len(clients) > 6 else "")
        msg = (f"Broker {loss.broker} stopped answering after {_clock(loss.last_answer)}: {len(loss.connections)} "
               f"connections ({names}) were cut at once with {loss.in_flight} request(s) in flight, and no "
               f"connection opened before was answered again; {back}. Its {lost} fetch session(s) were lost with it.")
        return Finding(
            code="BROKER_LOST", severity=SEVERITY["BROKER_LOST"], cause=None, client=first.client,
            client_id=first.client_id, broker=loss.broker, session_id=None, epoch=None, file=None,
            request_frame=first.cut_request_frame, response_frame=None, ts=loss.last_answer, message=msg,
            advice=advice("BROKER_LOST"), count=len(loss.connections),
            frames=tuple(c.cut_request_frame for c in loss.connections if c.cut_request_frame is not None)[:MAX_FRAMES],
        )  # fmt: skip

    def _shadow_caches(self, resolver: NotFoundResolver, tracker: SessionTracker) -> None:
        """Replay each broker's cache through Kafka's engine (analysis.shadow): the evictions it proves end their
        sessions, and its peak is the broker's max_live_sessions."""
        explained: dict[str, set] = {}
        unexplained: set[str] = set()
        for p in self.pending_70:
            if resolver.cause_before_cache(p) is None:
                unexplained.add(p.session.broker)
            elif p.session.error_ts is not None:
                explained.setdefault(p.session.broker, set()).add(p.session)
        for name, b in tracker.brokers.items():
            verdict = infer(b.cache_events, self.cache_slots, self.cache_shards,
                            evidence=bool(b.refused) or name in unexplained,
                            gone=frozenset(explained.get(name, ())), eviction_ms=self.eviction_ms)
            resolver.verdicts[name] = verdict
            b.max_live = verdict.peak
            b.occupancy = verdict.occupancy
            b.cache_events = CacheLog()  # replayed: free the memory
            for victim, e in verdict.evictions.items():
                if victim.end in (ALIVE, LOST) or (victim.end == CLOSED and victim.end_ts is not None
                                                   and victim.end_ts * 1000 >= e.t_ms):
                    n = e.evictor
                    if victim.end == CLOSED and e.reason == "stale" and victim.error_ts is None:
                        # its client came back naming it with a full fetch: the broker had evicted it already
                        self.findings.append(self._stale_comeback(victim, e, victim.end_frame, victim.end_ts))
                    how = (f"evicted as stale (idle {e.idle_ms / 1000:.1f} s)" if e.reason == "stale" else
                           f"evicted by size ({e.victim_size} < {e.evictor_size} partitions)")
                    victim.end = EVICTED
                    victim.end_reason = (f"{how} for session {n.session_id} of {n.client_id or '?'}@{n.client}")
                    victim.end_frame = n.created_response_frame
                    victim.end_ts = e.t_ms / 1000

    def _stale_comeback(self, victim, e, frame, ts) -> Finding:
        n = e.evictor
        msg = (f"Session {victim.session_id} of {victim.client_id or '?'}@{victim.client} was evicted as stale at "
               f"{_clock(e.t_ms / 1000)}: its client had not used it for {e.idle_ms / 1000:.1f} s (over Kafka's "
               f"120 s) when session {n.session_id} of {n.client_id or '?'}@{n.client} was created in its shard. "
               f"The client came back {ts - e.t_ms / 1000:.1f} s later (frame {frame}) with a full fetch naming it, "
               "so it had to start a new session.")
        return Finding(
            code="STALE_EVICTION", severity=SEVERITY["STALE_EVICTION"], cause="idle_client", client=victim.client,
            client_id=victim.client_id, broker=victim.broker, session_id=victim.session_id, epoch=0,
            file=victim.file, request_frame=frame, response_frame=None, ts=e.t_ms / 1000, message=msg,
            advice=advice("STALE_EVICTION"), count=1, frames=(frame,) if frame is not None else (),
        )  # fmt: skip

    def _eviction_pressure(self, evicted: dict[str, list], tracker: SessionTracker) -> None:
        for broker, victims in evicted.items():
            if not tracker.brokers[broker].granted:
                continue  # no response shows this broker keeping sessions: nothing to say about its cache
            evictors: dict[tuple, int] = {}
            for _, c in victims:
                n = c.evicted_by
                evictors[(n.client_key, n.client)] = evictors.get((n.client_key, n.client), 0) + 1
            ranked = sorted(evictors.items(), key=lambda kv: -kv[1])
            names = ", ".join(f"{(k[0][1] or '?')}@{k[1]} ({v})" for k, v in ranked[:5])
            first_p = victims[0][0]
            b = tracker.brokers[broker]
            msg = (f"Broker {broker} evicted {len(victims)} session(s) still in use to make room in full cache shards "
                   f"({len(b.created)} sessions were created in the capture), each for a session with more "
                   f"partitions or a follower's; evictors: {names}.")
            top_key, top_client = ranked[0][0]
            self.findings.append(Finding(
                code="EVICTION_PRESSURE", severity=SEVERITY["EVICTION_PRESSURE"], cause=None, client=top_client,
                client_id=top_key[1], broker=broker, session_id=None, epoch=None, file=first_p.ex.file,
                request_frame=first_p.ex.request_frame, response_frame=first_p.ex.response_frame, ts=first_p.ex.ts,
                message=msg, advice=advice("EVICTION_PRESSURE"), count=len(victims),
                frames=tuple(p.ex.response_frame for p, _ in victims if p.ex.response_frame is not None)[:MAX_FRAMES],
            ))  # fmt: skip

    def _starvation_findings(self) -> None:
        for (_host, _client_id, broker), st in self._starved.items():
            for sex, first_frame, topic, partition in st.starved.values():
                msg = (f"Partition {topic}-{partition} had data (high watermark above the fetch offset) but was "
                       f"left out of {STARVATION_RUNS} full responses in a row from {broker} (KIP-74 starvation).")
                frames = [f for f in (first_frame, sex.response_frame) if f is not None]
                self._add_agg("PARTITION_STARVATION", None, sex, msg, STARVATION_RUNS, frames)

    def _aggregates(self, tracker: SessionTracker) -> None:
        for agg in self._over_max.values():
            msg = (f"Response records ({agg.extra['total']} bytes) exceeded the request's MaxBytes "
                   f"({agg.extra['max']}) by more than the first record batch, in {agg.count} response(s).")
            self._add_agg("RESPONSE_OVER_MAX_BYTES", None, agg.ex, msg, agg.count, agg.frames)
        for agg in self._snapshot_errors.values():
            msg = agg.extra["message"] + (f" ({agg.count} times)" if agg.count > 1 else "")
            self._add_agg("SNAPSHOT_ERROR", None, agg.ex, msg, agg.count, agg.frames)
        for (client, broker), rows in self._missing.items():
            end = self.last_ts
            # a request cut with its broker is in BROKER_LOST: the capture did not lose its answer
            late = [ex for ex in rows if (end is None or ex.ts is None
                    or ex.ts + (ex.max_wait_ms or 0) / 1000 + IN_FLIGHT_GRACE < end)
                    and (ex.broker, ex.conn) not in self._cut]  # fmt: skip
            if not late:
                continue  # only requests still in flight when the capture stopped
            # A response the capture lost leaves the client going on: its next requests on the connection are
            # answered. Requests after which nothing was answered on their connection were never answered (a
            # client closing while the broker holds its fetch for MaxWaitMs, as franz-go does on a rebalance).
            connections = tracker.brokers[broker].connections
            cut: list[Exchange] = []
            lost: list[Exchange] = []
            for ex in late:
                (cut if _last_on_its_connection(connections.get(ex.conn), ex) else lost).append(ex)
            if lost:
                msg = (f"{len(lost)} request(s) from {client} to {broker} have no response in the capture "
                       f"(first at frame {lost[0].request_frame}).")
                self._add_agg("RESPONSE_MISSING", None, lost[0], msg, len(lost), [e.request_frame for e in lost])
            if cut:
                msg = (f"{len(cut)} request(s) from {client} to {broker} have no response, and nothing after them "
                       f"was answered on their connection (first at frame {cut[0].request_frame}): the connection "
                       "ended, or was left, with them in flight.")
                self._add_agg("RESPONSE_MISSING", LAST_ON_CONNECTION, cut[0], msg, len(cut),
                              [e.request_frame for e in cut])
        for (code, file, client, broker), agg in self._quality.items():
            first = agg.ex
            assert isinstance(first, _FirstSeen), "_quality_event anchors its aggregates where they were first seen"
            if code == "CAPTURE_GAP":
                msg = (f"The capture lost {agg.extra.get('lost_bytes', 0)} bytes in {agg.count} gap(s) on the "
                       f"connection {client} -> {broker}; exchanges there may be missing.")
            else:
                msg = (f"{agg.count} response(s) from {broker} to {client} have no request in the capture (first at "
                       f"frame {first.frame}).")
            self.findings.append(Finding(
                code=code, severity=SEVERITY[code], cause=None, client=client, client_id=None, broker=broker,
                session_id=None, epoch=None, file=file, request_frame=None, response_frame=first.frame,
                ts=first.ts, message=msg, advice=advice(code), count=agg.count, frames=tuple(agg.frames),
            ))  # fmt: skip

        for m in self._started_mid_message:
            resumed = (f"decoding resumed at frame {m.resumed_frame}" if m.resumed_frame is not None
                       else "no whole message followed before the capture ended")
            msg = (f"The capture started in the middle of a {m.direction} on the connection {m.client} -> "
                   f"{m.broker} (frame {m.frame}): its first {m.skipped_bytes:,} bytes were skipped and {resumed}; "
                   "nothing after that was lost.")
            frames = tuple(f for f in (m.frame, m.resumed_frame) if f is not None)
            self.findings.append(Finding(
                code="CAPTURE_GAP", severity=SEVERITY["CAPTURE_GAP"], cause="started_mid_message", client=m.client,
                client_id=None, broker=m.broker, session_id=None, epoch=None, file=m.file, request_frame=None,
                response_frame=m.resumed_frame, ts=None, message=msg,
                advice=advice("CAPTURE_GAP", "started_mid_message"), count=1, frames=frames,
            ))  # fmt: skip

    # -- building ------------------------------------------------------------------------------------------
    def _add_ex(self, code, cause, ex, message, stale: bool = False) -> None:
        frames = [f for f in (ex.request_frame, ex.response_frame) if f is not None]
        f = finding(code, cause, ex, message, 1, frames)
        if stale:  # the idle client is the cause, not the cache's size
            f = replace(f, advice=advice(code, "evicted_stale"))
        self.findings.append(f)

    def _add_agg(self, code, cause, ex, message, count, frames) -> None:
        self.findings.append(finding(code, cause, ex, message, count, frames))

