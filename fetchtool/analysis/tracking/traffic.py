"""Fetch traffic as a rate and a wait: response times, fetches per second, empty responses, and whether the broker
held empty fetches for MaxWaitMs, per client, per broker and per session; plus the per (client, broker) evidence
the traffic findings need (MaxWait 0 polling, re-fetch loops on errors).

Sans-IO and bounded: `TrafficTracker.feed(exchange, observation)` keeps counters and latency sketches
(fetchtool.analysis.tracking.latency) per client, broker, session and (client, broker) pair, never per exchange.
Every counter adds up and every sketch merges, so the Spark engine's per-broker parts merge to the one-pass result.

Only Fetch (api key 1) counts; FetchSnapshot transfers are another kind of traffic. KRaft voters' fetches of the
metadata log count for times and rates but not for the MaxWait check: Raft answers at once when the high
watermark moves (KafkaRaftClient.handleFetchRequest), so an early empty answer there is correct.
"""

from __future__ import annotations

from collections.abc import Iterable
from math import ceil, log
from operator import itemgetter

from fetchtool.exchange import FETCH, Exchange

from fetchtool.analysis.model import FULL_CREATE, INCREMENTAL, TrafficSummary
from fetchtool.analysis.tracking.kraft import is_kraft_voter_fetch
from fetchtool.analysis.tracking.latency import INV_LOG_GAMMA, ZERO, ZERO_BELOW_MS, LatencySketch

# An empty answer sooner than this share of MaxWaitMs was not held in the purgatory: Kafka completes a parked
# fetch at MaxWait (timer tick 1 ms) unless data, an error or a leader change ends it, all visible in the response.
EARLY_SHARE = 0.5
# Below this many checked responses a MaxWait verdict is noise (a single fetch at an offset past the high
# watermark, DelayedFetch case F, is answered at once and empty).
VERDICT_MIN_CHECKED = 3
# Re-fetching sooner than this after an error response is a tight loop: half of Java's retry.backoff.ms (100 ms).
RETRY_GAP_S = 0.05
MAX_FRAMES = 20

_error = itemgetter(3)
_preferred_replica = itemgetter(7)
_diverging_epoch = itemgetter(8)
_records = itemgetter(10)


class TrafficStats:
    """Counters of one client, broker or session (or of one cell: a client's fetches of one session, or of no
    session, on one broker); all add up across cells and parts."""

    __slots__ = ("fetches", "first_ts", "last_ts", "latency", "empty", "checked", "early")

    def __init__(self) -> None:
        self.fetches = 0
        self.first_ts: float | None = None
        self.last_ts: float | None = None
        self.latency = LatencySketch()
        self.empty = 0  # responses with no records and no error
        self.checked = 0  # empty, error-free, unthrottled answers to MaxWait > 0, MinBytes >= 1 (the MaxWait check)
        self.early = 0  # of those, answered before EARLY_SHARE of MaxWait

    def merge(self, other: TrafficStats) -> None:
        self.merge_all((other,))

    def merge_all(self, cells: Iterable[TrafficStats]) -> None:
        """Add every cell, in one loop (a broker of 100,000 sessions has as many)."""
        counts = self.latency.counts
        get = counts.get
        fetches, empty, checked, early = self.fetches, self.empty, self.checked, self.early
        times = []
        for c in cells:
            fetches += c.fetches
            empty += c.empty
            checked += c.checked
            early += c.early
            if c.first_ts is not None:
                times.append(c.first_ts)
            if c.last_ts is not None:
                times.append(c.last_ts)
            for i, n in c.latency.counts.items():
                counts[i] = get(i, 0) + n
        self.fetches, self.empty, self.checked, self.early = fetches, empty, checked, early
        if times:
            lo, hi = min(times), max(times)
            self.first_ts = lo if self.first_ts is None else min(self.first_ts, lo)
            self.last_ts = hi if self.last_ts is None else max(self.last_ts, hi)

    @property
    def honoured(self) -> bool | None:
        """Did the broker hold empty fetches for MaxWait? None: too few checked responses to say."""
        if self.checked < VERDICT_MIN_CHECKED:
            return None
        return self.early * 2 <= self.checked

    def summary(self) -> TrafficSummary:
        span = None if self.first_ts is None or self.last_ts is None else self.last_ts - self.first_ts
        rate = round((self.fetches - 1) / span, 3) if span and self.fetches > 1 else None
        n = self.latency.n
        return TrafficSummary(
            fetches=self.fetches, fetches_per_s=rate, response_ms=self.latency.to_json(), empty_responses=self.empty,
            empty_share=round(self.empty / n, 4) if n else None, max_wait_checked=self.checked,
            max_wait_early=self.early, max_wait_honoured=self.honoured,
        )  # fmt: skip


def merged(cells) -> TrafficStats:
    out = TrafficStats()
    out.merge_all(cells)
    return out


class PairTraffic:
    """What one client did on one broker that the traffic findings judge (first exchanges kept as evidence)."""

    __slots__ = ("zero_wait", "zero_wait_empty", "zero_first", "zero_frames", "prev_error", "prev_response_ts",
                 "loop", "loop_head", "loop_start", "loop_end", "loop_codes", "loops", "loop_fetches", "longest",
                 "loop_first", "loop_frames", "fetches")  # fmt: skip

    def __init__(self) -> None:
        self.fetches = 0
        self.zero_wait = 0  # fetches with MaxWait 0
        self.zero_wait_empty = 0  # ... answered empty (the client asked again for nothing)
        self.zero_first: Exchange | None = None
        self.zero_frames: list[int] = []
        self.prev_error: tuple | None = None  # the error codes of the previous response, if it carried any
        self.prev_response_ts: float | None = None
        self.loop = 0  # re-fetches in the current run of quick re-fetches after errors
        self.loop_head: list[Exchange] = []  # its first exchanges (evidence)
        self.loop_start: float | None = None  # the error response it began after
        self.loop_end: float | None = None  # its last request
        self.loop_codes: dict[int, None] = {}  # error codes the run re-fetched after
        self.loops = 0  # runs that reached the storm threshold (counted when they end)
        self.loop_fetches = 0  # re-fetches in those runs
        self.longest: tuple = (0, 0.0, ())  # (re-fetches, seconds, error codes) of the longest run
        self.loop_first: Exchange | None = None  # first exchange of the first reported run
        self.loop_frames: list[int] = []


class TrafficTracker:
    """Feed every exchange with the tracker's Observation; read summaries and pair evidence at the end.

    Each exchange updates one cell, (client, broker, session or None), so the per-exchange cost is one lookup and
    a few counters; clients, brokers and sessions are the sums of their cells, made once at the end."""

    def __init__(self, storm_refetches: int, session_brokers: dict, sessions: list | None = None) -> None:
        """``session_brokers``: the SessionTracker's brokers (to find the session a full fetch created);
        ``sessions``: its list of sessions (each holds its own client's cell: see feed)."""
        self.session_brokers = session_brokers
        self.sessions = sessions
        # (TrackedClient, broker, TrackedSession or None) -> (stats, pair); the tracker's objects hash by identity
        self.cells: dict[tuple, tuple[TrafficStats, PairTraffic]] = {}
        self.pairs: dict[tuple, PairTraffic] = {}  # (host, client id, broker)
        self.early_first: dict[str, tuple[Exchange, list[int], LatencySketch]] = {}  # broker -> evidence
        self.storm_refetches = storm_refetches

    def feed(self, ex: Exchange, obs) -> None:
        if ex.api_key != FETCH:
            return
        session = obs.session
        if obs.kind == FULL_CREATE:
            session = _created_session(self.session_brokers, ex)
        client = obs.client
        if session is not None and self.sessions is not None and session.client_key is client.key:
            # a session's own client: its cell is held by the session (memory: a storm has a cell per session)
            st = session.traffic
            if st is None:
                st = session.traffic = TrafficStats()
            pair = self._pair(client, session.broker)
        else:
            b = self.session_brokers.get(ex.broker)
            key = (client, ex.broker if b is None else b.broker, session)  # the tracker's string (memory)
            cell = self.cells.get(key)
            if cell is None:
                cell = self.cells[key] = self._cell(client, ex.broker)
            st, pair = cell
        st.fetches += 1
        ts = ex.ts
        wait = ex.max_wait_ms
        if wait == 0:
            pair.zero_wait += 1
        if ts is None:
            pair.prev_error = None
            return
        if st.first_ts is None or ts < st.first_ts:
            st.first_ts = ts
        if st.last_ts is None or ts > st.last_ts:
            st.last_ts = ts
        if pair.prev_error is not None or pair.loop:
            self._loop(pair, ex, ts)
        rp = ex.response_partitions
        rts = ex.response_ts
        if rp is None or rts is None:
            pair.prev_error = None
            return  # no response captured: nothing about its timing or content
        ms = (rts - ts) * 1000.0
        b = ceil(log(ms) * INV_LOG_GAMMA) if ms >= ZERO_BELOW_MS else ZERO  # latency.bucket, inlined
        counts = st.latency.counts
        counts[b] = counts.get(b, 0) + 1
        if ex.error_code or (rp and any(map(_error, rp))):
            codes = {ex.error_code} if ex.error_code else set()
            codes.update(c for c in map(_error, rp) if c)
            pair.prev_error = tuple(sorted(codes))
            pair.prev_response_ts = rts
            return
        pair.prev_error = None
        if rp and any(map(_records, rp)):
            return
        st.empty += 1
        if wait == 0:
            pair.zero_wait_empty += 1
            if pair.zero_first is None:
                pair.zero_first = ex
            if len(pair.zero_frames) < MAX_FRAMES and ex.request_frame is not None:
                pair.zero_frames.append(ex.request_frame)
        if not self._checkable(ex, obs, rp):
            return
        st.checked += 1
        if ms < (wait or 0) * EARLY_SHARE:  # _checkable: wait > 0 here
            st.early += 1
            ev = self.early_first.get(ex.broker)
            if ev is None:
                ev = self.early_first[ex.broker] = (ex, [], LatencySketch())
            if len(ev[1]) < MAX_FRAMES and ex.request_frame is not None:
                ev[1].append(ex.request_frame)
            ev[2].add(b)

    def _cell(self, client, broker: str) -> tuple[TrafficStats, PairTraffic]:
        return TrafficStats(), self._pair(client, broker)

    def _pair(self, client, broker: str) -> PairTraffic:
        pkey = (client.host, client.client_id, broker)
        pair = self.pairs.get(pkey)
        if pair is None:
            pair = self.pairs[pkey] = PairTraffic()
        return pair

    # -- results: sums of cells ------------------------------------------------------------------------------
    def _all_cells(self):
        """(client key, broker, session or None, stats) of every cell: the sessions' own, then the others."""
        for s in self.sessions or ():
            if s.traffic is not None:
                yield s.client_key, s.broker, s, s.traffic
        for (client, broker, session), (st, _p) in self.cells.items():
            yield client.key, broker, session, st

    def client_stats(self) -> dict[tuple, TrafficStats]:
        """(host, client id) -> stats, as the SessionTracker keys clients."""
        groups: dict[tuple, list] = {}
        for client_key, _b, _s, st in self._all_cells():
            groups.setdefault(client_key, []).append(st)
        return {k: merged(v) for k, v in groups.items()}

    def broker_stats(self) -> dict[str, TrafficStats]:
        groups: dict[str, list] = {}
        for _c, broker, _s, st in self._all_cells():
            groups.setdefault(broker, []).append(st)
        return {k: merged(v) for k, v in groups.items()}

    def session_stats(self) -> dict[int, TrafficStats]:
        """id(TrackedSession) -> stats (the sessions live as long as the SessionTracker that made them)."""
        # a session fetched by one client (the usual case) is its one cell: read as it is, not copied (memory)
        out: dict[int, TrafficStats] = {}
        shared: dict[int, list] = {}
        for _c, _b, session, st in self._all_cells():
            if session is not None:
                k = id(session)
                if k in out:
                    shared.setdefault(k, [out[k]]).append(st)
                else:
                    out[k] = st
        for k, cells in shared.items():
            out[k] = merged(cells)
        return out

    @staticmethod
    def _checkable(ex: Exchange, obs, rp) -> bool:
        """Would Apache Kafka have parked this fetch until MaxWait (ReplicaManager.fetchMessages)? Not when it
        does not want to wait (MaxWait 0), needs no data (MinBytes 0), names no partition, was throttled, has a
        diverging epoch or a preferred read replica (KIP-392) to tell, or is Raft's (see the module doc)."""
        if not ex.max_wait_ms or ex.max_wait_ms < 0 or (ex.min_bytes or 0) < 1 or (ex.throttle_time_ms or 0) > 0:
            return False
        if not ex.request_partitions and (obs.kind != INCREMENTAL or not ex.response_session_id):
            # A full fetch of nothing; or an incremental one that left its session empty, which Kafka closes
            # (session id 0 in the answer): an incremental answer naming its session means partitions to read.
            return False
        if rp and (max(map(_diverging_epoch, rp)) >= 0 or max(map(_preferred_replica, rp)) >= 0):
            return False
        return not is_kraft_voter_fetch(ex)

    def _loop(self, pair: PairTraffic, ex: Exchange, ts: float) -> None:
        """A request right after an error response continues a loop; anything else ends it."""
        if pair.prev_error is not None and pair.prev_response_ts is not None \
                and ts - pair.prev_response_ts < RETRY_GAP_S:
            if not pair.loop:
                pair.loop_start = pair.prev_response_ts
            pair.loop += 1
            pair.loop_end = ts
            if len(pair.loop_head) < MAX_FRAMES:
                pair.loop_head.append(ex)
            pair.loop_codes.update(dict.fromkeys(pair.prev_error))
            return
        self._end_loop(pair)

    def _end_loop(self, pair: PairTraffic) -> None:
        n = pair.loop
        if n >= self.storm_refetches:
            pair.loops += 1
            pair.loop_fetches += n
            seconds = (pair.loop_end or 0.0) - (pair.loop_start or 0.0)
            if n > pair.longest[0]:
                pair.longest = (n, seconds, tuple(sorted(pair.loop_codes)))
            if pair.loop_first is None:
                pair.loop_first = pair.loop_head[0]
                pair.loop_frames = [e.request_frame for e in pair.loop_head if e.request_frame is not None]
        pair.loop = 0
        pair.loop_head = []
        pair.loop_codes = {}
        pair.loop_start = pair.loop_end = None

    def finish(self) -> None:
        """End the loops still running when the capture stopped."""
        for pair in self.pairs.values():
            self._end_loop(pair)


def _created_session(brokers: dict, ex: Exchange):
    """The session a session-creating fetch created: its broker's latest session of that id."""
    b = brokers.get(ex.broker)
    return None if b is None else b.sessions.get(ex.response_session_id)
