"""The replay driver: the I/O edge that re-issues a plan's fetches over real connections.

Each client stream gets its own TCP connection and its own ClientModel (FetchSessionHandler for session clients),
fresh correlation ids, and the broker's live session ids (captured ids are mapped to live ones as they appear).
Pacing follows the capture scaled by `speed`; `as_fast` sends each request as soon as every earlier request of
the capture has been sent (one request in flight per connection, as a Kafka client does).

Without a target broker the driver starts `fetchtool broker` in-process on a free loopback port, with the
capture's topics (same names and ids), logs pre-filled so the rebased captured offsets exist, and the cache
configuration under test. Its clock runs `speed` times faster than real time (as-fast: it follows the captured
time of the requests), so session eviction times behave as in the capture.

With a target broker (--broker) the driver first prepares it (target.py): the Fetch versions it speaks, the
capture's topics by name (their ids are the target's), missing topics created and filled with records, and a
leader for every partition before the first replayed fetch.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from array import array
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

from fetchtool.analysis.diagnosis.partition_codes import name_of
from fetchtool.replay.clients import AS_CAPTURED, ClientModel, effective_behaviour
from fetchtool.replay.plan import REQUEST, SESSION, ClientStream, ReplayPlan, every_read, step_starts
from fetchtool.replay.simulate import CapturedSessionIds, SimConfig
from fetchtool.replay.net import (RESERVED_FILES, OutOfFiles, ReplayError, allow_open_files, connect,
                                  read_frame_within, reason)
from fetchtool.replay.tally import FETCH_SESSION_ID_NOT_FOUND, CapturedCounts, Tally, captured_counts
from fetchtool.replay.target import Target, close_sessions, fetch_version, prepare, records_to_write
from fetchtool.replay.wire import TopicMapping, fetch_request, fetch_response
from fetchtool.sessions.partitions import ZERO_UUID, TopicIdPartition

LOOPBACK = "127.0.0.1"
OFFSET_OUT_OF_RANGE = 1
EMBEDDED = "embedded"
PREFILL_BATCH = 500  # records per pre-filled batch of the embedded broker


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    broker: str | None = None  # "host:port"; None: the embedded broker
    config: SimConfig = SimConfig()  # the embedded broker's cache
    speed: float = 1.0
    as_fast: bool = False
    sessions: str = AS_CAPTURED
    create_topics: bool = False
    timeout_s: float = 30.0  # a response that takes longer counts as a timeout (the client resets its session)
    prefill_limit: int = 20_000  # records pre-filled per partition of the embedded broker at most
    # Let each stream's planned fetches go once it is replayed (the command's plan serves this one replay): what
    # the report needs of them is taken before (ReplayRun.captured, captured_versions), so that a capture of
    # 100,000 connections holds the plan of those open, not every one's (about 100 MB on a storm).
    release_plan: bool = False


@dataclass(slots=True)
class StreamResult:
    stream: ClientStream
    tally: Tally = field(default_factory=Tally)
    rtts_ms: list[float] = field(default_factory=list)
    timeouts: int = 0
    session_ids: dict[int, int] = field(default_factory=dict)  # captured session id -> live session id
    partition_errors: Counter[int] = field(default_factory=Counter)  # partition-level error code -> count
    open_session: tuple[int, int] | None = None  # (Fetch version, session id) still open after the last fetch
    problem: str | None = None  # why the stream stopped early


@dataclass(slots=True, repr=False)
class ReplayRun:
    """A replay's results so far; complete when `finished`, partial after an interrupt.

    Its repr is one line: asyncio.run (CPython 3.11) formats the main task's repr, result included, twice as it
    restores the SIGINT handler, and a full repr of every stream and the plan cost seconds at 10,000 connections."""

    plan: ReplayPlan
    options: ReplayOptions
    target: str = EMBEDDED
    streams: list[StreamResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    done: int = 0
    started: float = 0.0
    elapsed_s: float = 0.0
    finished: bool = False
    interrupted: bool = False
    broker_metrics: dict | None = None
    prepared: Target | None = None  # --broker: what preparing the target found and did
    closed_sessions: int = 0  # --broker: sessions still open at the end, closed with (id, -1)
    connection_bound: int = 0  # paced replay: connections held open at once at most
    # per stream index with any: the partition errors the capture's responses carried (CapturedLog)
    captured_partition_errors: dict[int, Counter[int]] | None = None
    captured: CapturedCounts | None = None  # what the capture shows, counted before the replay
    captured_versions: frozenset[int] = frozenset()  # the Fetch versions the capture's requests used
    peak_connections: int = 0  # connections the replay held open at once, at most

    def captured_counts(self) -> CapturedCounts:
        """What the capture shows: taken before the replay (which may let its plan go), or now if it never
        started."""
        if self.captured is None:
            self.captured = captured_counts(self.plan)
        return self.captured

    def __repr__(self) -> str:
        return (f"ReplayRun(target={self.target!r}, streams={len(self.streams)}, done={self.done}, "
                f"finished={self.finished}, interrupted={self.interrupted})")

    def totals(self) -> Tally:
        """The sum of every stream's tally so far."""
        total = Tally()
        for r in self.streams:
            total.add(r.tally)
        return total


class _Sequencer:
    """As-fast ordering: a request goes out once every earlier event of the capture's timeline happened (earlier
    requests sent, earlier responses received), so sessions are created and used in the captured order.

    Each waiting request has its own future, woken when the timeline reaches its position: one wake-up per
    request, whatever the number of connections waiting (a shared condition woke every waiter on every event,
    quadratic in connections)."""

    def __init__(self) -> None:
        self.next = 0
        self.done: set[int] = set()
        self.waiting: dict[int, asyncio.Future[None]] = {}

    async def turn(self, n: int) -> None:
        if self.next >= n:
            return
        waiter = self.waiting[n] = asyncio.get_running_loop().create_future()
        try:
            await waiter
        finally:
            self.waiting.pop(n, None)

    def mark(self, *positions: int) -> None:
        """The events at these timeline positions happened (-1: a response the capture does not have)."""
        # (a position already passed is done: kept, a stream's end marking its every position again held them all)
        next_ = self.next
        self.done.update(p for p in positions if p >= next_)
        before = self.next
        while self.next in self.done:
            self.done.discard(self.next)
            self.next += 1
        if self.waiting:
            for n in range(before + 1, self.next + 1):
                waiter = self.waiting.pop(n, None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(None)


@dataclass(frozen=True, slots=True)
class CapturedLog:
    """What a replay takes from the plan's reads (the captured broker's log at each step), in one walk: a plan
    built with_reads=LATER holds none of them while it replays (on a 100,000-connection storm they were about
    100 MB; on 1.1 GB of capture 250 MB)."""

    low: dict[tuple[str, int], int]  # per partition: the lowest captured fetch offset (becomes 0 on the target)
    high: dict[tuple[str, int], int]  # the highest offset the capture shows (high watermark or fetch offset)
    partition_errors: dict[int, Counter[int]]  # per stream index with any: partition-level error codes read


def captured_log(plan: ReplayPlan) -> CapturedLog:
    """Per partition the captured offsets the target is pre-filled up to, per stream the partition errors the
    capture's responses carried."""
    low: dict[tuple[str, int], int] = {}
    high: dict[tuple[str, int], int] = {}
    errors: dict[int, Counter[int]] = {}
    streams = plan.streams
    for i, j, reads in every_read(plan):
        for w in streams[i].fetches[j].wanted:
            key = (w.tp.topic, w.tp.partition)
            off = w.data.fetch_offset
            if off >= 0 and (key not in low or off < low[key]):
                low[key] = off
            hw = reads.get(w.key)
            top = max(off, hw.high_watermark if hw is not None else -1)
            if top > high.get(key, -1):
                high[key] = top
        for r in reads.values():
            if r.error_code:
                errors.setdefault(i, Counter())[r.error_code] += 1
    return CapturedLog(low, high, errors)


async def _start_embedded(plan: ReplayPlan, options: ReplayOptions, clock: Callable[[], int], speed: float,
                          low: dict, high: dict, connections: int):
    from fetchtool.broker.rawclient import make_batch
    from fetchtool.broker.server import Broker
    from fetchtool.broker.state import BrokerConfig

    cfg = options.config
    # The embedded broker draws the captured session ids where it can (see simulate.CapturedSessionIds): Kafka
    # evicts the smallest id among equally sized sessions, so the same ids pick the same victims.
    # Every replayed client connects from loopback: the broker lets one address hold half its max_connections
    # (BrokerConfig.per_ip_limit), so both are sized to the connections the replay holds at once (a capture of
    # 1,200 connections open together lost 200 of their fetches to the default limit of 1,000, each after a
    # 30 s timeout).
    limit = max(BrokerConfig().max_connections, 2 * (connections + 16))
    broker = Broker(BrokerConfig(host=LOOPBACK, port=0, cache_slots=cfg.cache_slots, cache_shards=cfg.cache_shards,
                                 eviction_ms=cfg.eviction_ms, session_id_source=CapturedSessionIds(0),
                                 max_connections=limit),
                    clock=clock, speed=speed)
    state = broker.core.state
    for name, info in plan.topics.items():
        state.create_topic(name, info.partition_count, info.topic_id)
    # Each partition's records up to what the capture fetched: whole batches of 500 are one batch made on read
    # (PartitionLog.fill), not held: the 108 MB benchmark capture wants 22.6 million records over 4,670
    # partitions, which took over a minute to write, the event loop stopped, and ~565 MB.
    value = b"x" * 16
    batch = make_batch([value] * PREFILL_BATCH)
    for (name, partition), want in records_to_write(low, high, plan.topics, options.prefill_limit).items():
        log = state.topics.partition(name, partition)
        if log is None:
            continue
        whole, rest = divmod(want, PREFILL_BATCH)
        if whole:
            log.fill(batch, whole)
        if rest:
            log.append(make_batch([value] * rest))
    await broker.start()
    return broker


def connection_bound(plan: ReplayPlan, embedded: bool) -> int:
    """How many connections the replay may hold open at once: what the capture held at once, with room for a
    paced replay running late, within the open-files limit (raised towards what is needed where the hard limit
    allows). ReplayError with one line when the limit is below what the capture held at once."""
    peak = max(1, plan.connections_at_once())
    per_connection = 2 if embedded else 1  # the embedded broker's end of each connection is this process's too
    wanted = max(2 * peak, peak + 16)
    limit = allow_open_files(wanted * per_connection + RESERVED_FILES)
    if limit is None:
        return wanted
    room = (limit - RESERVED_FILES) // per_connection
    if room < peak:
        needed = peak * per_connection + RESERVED_FILES
        raise ReplayError(f"the capture holds {peak:,} connections open at once; replaying them"
                          f"{' against the embedded broker' if embedded else ''} needs about {needed:,} open files, "
                          f"the limit is {limit:,}: raise it (ulimit -n {needed})")
    return min(wanted, room)


def parse_broker(text: str) -> tuple[str, int]:
    """'HOST:PORT' (IPv6 as '[::1]:9092') -> (host, port); ValueError with a one-line message otherwise."""
    host, sep, port_text = text.strip().rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        port = int(port_text)
    except ValueError:
        port = -1
    if not sep or not host or not 1 <= port <= 65535:
        raise ValueError(f"--broker must be HOST:PORT with a port 1-65535, got {text!r}")
    return host, port


async def replay(plan: ReplayPlan, options: ReplayOptions, run: ReplayRun | None = None,
                 on_progress: Callable[[int], None] | None = None) -> ReplayRun:
    """Replay the plan; fills and returns `run` (pass one in to keep partial results if cancelled)."""
    run = run if run is not None else ReplayRun(plan, options)
    # Each stream's result is made when the stream starts (a storm's 100,000 made at once were 45 MB while the
    # whole plan was still held); run.streams lists them all, with the ones never started, once the replay ends.
    results: list[StreamResult | None] = [None] * len(plan.streams)

    def every_result() -> None:
        run.streams = [r if r is not None else StreamResult(s) for r, s in zip(results, plan.streams)]

    loop = asyncio.get_running_loop()
    speed = max(options.speed, 1e-6)
    log = captured_log(plan)
    run.captured_partition_errors = log.partition_errors
    run.captured = captured_counts(plan)
    run.captured_versions = frozenset(f.version for s in plan.streams for f in s.fetches)
    low, high = log.low, log.high
    virtual_ms = [0]
    epoch_ms = int(plan.start_ts * 1000)
    t0 = loop.time()
    if options.as_fast:
        def clock() -> int:
            return epoch_ms + virtual_ms[0]
    else:
        def clock() -> int:
            return epoch_ms + int((loop.time() - t0) * 1000 * speed)

    bound = connection_bound(plan, embedded=options.broker is None)
    run.connection_bound = bound
    broker = None
    if options.broker is None:
        # As fast as possible, a fetch the broker parks (nothing new to read) is answered at once rather than
        # after MaxWaitMs/1000: nothing is produced during a replay, so waiting could only end in the same empty
        # answer, and a replay that waits for each response in turn spent 1 ms on each (the event loop's timer
        # resolution): 2.9 s of a 7.4 s replay of 2,000 short connections.
        broker = await _start_embedded(plan, options, clock, math.inf if options.as_fast else speed, low, high,
                                       bound)
        host, port = LOOPBACK, broker.port
        run.target = EMBEDDED
        ids = {name: info.topic_id for name, info in plan.topics.items() if info.topic_id is not None}
        for name in plan.topics:
            ids.setdefault(name, broker.core.state.topics.get(name).topic_id)
    else:
        try:
            host, port = parse_broker(options.broker)
        except ValueError as exc:
            raise ReplayError(str(exc)) from None
        run.target = options.broker
        run.prepared = await prepare(host, port, {n: t.partition_count for n, t in plan.topics.items()}, low, high,
                                     create=options.create_topics, timeout=options.timeout_s,
                                     prefill_limit=options.prefill_limit,
                                     probe_version=max(run.captured_versions, default=12))
        ids = run.prepared.topic_ids
    mapping = TopicMapping(ids, {str(v): k for k, v in ids.items()}, low)
    supported = run.prepared.fetch_versions if run.prepared is not None else None
    captured_ids = {name: info.topic_id or ZERO_UUID for name, info in plan.topics.items()}

    # Each step's request and response positions in the timeline (-1: no response captured), step j of stream i
    # at first[i] + j: two int arrays, where two dicts keyed by (i, j) took 100 MB on a 100,000-connection storm.
    first, total = step_starts(len(s.fetches) for s in plan.streams)   # (a stream's index is its place)
    req_pos = array("q", bytes(8 * total))
    resp_pos = array("q", [-1]) * total
    for n, (_t, phase, i, j) in enumerate(plan.timeline):
        (req_pos if phase == REQUEST else resp_pos)[first[i] + j] = n
    seq = _Sequencer()
    # Paced, a replay that falls behind the capture's clock would start every overdue connection at once; the
    # gate holds them to the bound. As fast as possible, the sequencer keeps the capture's order, so the replay
    # holds open what the capture did (a gate there could wait on a connection that waits for its turn).
    gate = None if options.as_fast else asyncio.Semaphore(bound)
    open_now = [0]
    run.started = time.monotonic()

    def progress() -> None:
        run.done += 1
        if on_progress is not None:
            on_progress(run.done)

    async def until(position: int, t_ms: int) -> None:
        """A step's turn: its place in the capture's order (as fast as possible), or its time, scaled (paced)."""
        if options.as_fast:
            await seq.turn(position)
        else:
            delay = t0 + t_ms / 1000 / speed - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)

    async def drive(result: StreamResult, holding: bool) -> None:
        stream = result.stream
        at = first[stream.index]  # the stream's steps in req_pos and resp_pos
        model = ClientModel(stream.behaviour, options.sessions)
        tally = result.tally
        reader: asyncio.StreamReader | None = None
        writer: asyncio.StreamWriter | None = None
        corr = 0
        # holding: a place under the gate, from the stream's first connection to its end (the launcher takes it)
        try:
            for j, fetch in enumerate(stream.fetches):
                await until(req_pos[at + j], fetch.t_ms)
                if reader is None or writer is None:
                    if gate is not None and not holding:
                        await gate.acquire()
                        holding = True
                    reader, writer = await connect(host, port, options.timeout_s)
                    open_now[0] += 1
                    run.peak_connections = max(run.peak_connections, open_now[0])
                sent_version = fetch_version(fetch.version, supported)
                if sent_version != fetch.version:
                    # the client speaks what the target does; its handler follows the version it really sends
                    fetch = dataclasses.replace(fetch, version=sent_version)
                req = model.request(fetch)
                corr += 1
                max_wait = fetch.max_wait_ms if broker is not None else (
                    0 if options.as_fast else int(fetch.max_wait_ms / speed))
                data = fetch_request(fetch.version, corr, stream.client_id, req.metadata, req.fetch_data,
                                     req.to_forget, mapping, max_wait, fetch.min_bytes, fetch.max_bytes,
                                     fetch.isolation_level)
                virtual_ms[0] = max(virtual_ms[0], fetch.t_ms)
                if broker is not None and req.metadata.epoch == 0:
                    broker.config.session_id_source.hint = (fetch.response_session_id or 0) if fetch.epoch == 0 else 0
                sent_at = loop.time()
                writer.write(data)
                tally.requests += 1
                tally.request_bytes += len(data)
                if options.as_fast:
                    seq.mark(req_pos[at + j])
                try:
                    payload = await read_frame_within(reader, options.timeout_s)
                except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError):
                    result.timeouts += 1
                    if options.as_fast:
                        seq.mark(resp_pos[at + j])
                    model.error()
                    writer.close()
                    open_now[0] -= 1
                    reader = writer = None
                    progress()
                    continue
                result.rtts_ms.append((loop.time() - sent_at) * 1000)
                if options.as_fast:
                    seq.mark(resp_pos[at + j])
                body = fetch_response(payload, fetch.version, mapping)
                tally.responses += 1
                tally.response_bytes += 4 + len(payload)
                tally.records_bytes += sum(p.records_bytes for p in body.partitions)
                err = body.error_code
                if err:
                    tally.errors[err] += 1
                for p in body.partitions:
                    if p.error_code:
                        result.partition_errors[p.error_code] += 1
                live_id = body.session_id or 0
                if req.metadata.is_full and req.metadata.epoch == 0 and live_id and not err:
                    tally.sessions_created += 1
                    if fetch.response_session_id:
                        result.session_ids[fetch.response_session_id] = live_id
                elif not req.metadata.is_full and not err:
                    tally.incremental += 1
                parts = [(TopicIdPartition(captured_ids.get(p.topic or "", ZERO_UUID), p.topic, p.partition), None)
                         for p in body.partitions]
                model.response(fetch.version, err, live_id, body.throttle_time_ms or 0, parts)
                progress()
            following = model.handler.next_metadata
            if stream.fetches and following.session_id and following.epoch > 0:
                result.open_session = (fetch.version, following.session_id)
        except OutOfFiles:
            raise  # the process can open no more connections: the replay stops (one line for the user)
        except ReplayError as exc:
            result.problem = str(exc)
        except (ConnectionError, asyncio.IncompleteReadError, OSError) as exc:
            result.problem = f"connection lost: {reason(exc)}"
        finally:
            if writer is not None:
                writer.close()
                open_now[0] -= 1
            if holding and gate is not None:
                gate.release()
            if options.as_fast:
                # a stream that stopped early must not hold back the others
                steps = range(at, at + len(stream.fetches))
                seq.mark(*(req_pos[n] for n in steps), *(resp_pos[n] for n in steps))
            if options.release_plan:
                stream.fetches = []

    # A stream's task (its coroutine, client model and connection) is made when the capture's clock or order
    # reaches the stream's first request and let go at its end, so a capture of 100,000 connections one after
    # another holds the few open at once, not 100,000 waiting tasks (about 1.5 KB each).
    running: set[asyncio.Task] = set()
    failure = loop.create_future()  # the first exception a stream's task ended with (gather's behaviour)

    def ended(task: asyncio.Task) -> None:
        running.discard(task)
        if not task.cancelled() and task.exception() is not None and not failure.done():
            failure.set_exception(cast(BaseException, task.exception()))

    async def launch() -> None:
        for n, (_t, phase, i, j) in enumerate(plan.timeline):
            if j or phase != REQUEST:
                continue  # streams start in the order of their first requests
            await until(n, plan.streams[i].fetches[0].t_ms)
            if gate is not None:
                await gate.acquire()
            result = results[i] = StreamResult(plan.streams[i])
            task = asyncio.ensure_future(drive(result, gate is not None))
            running.add(task)
            task.add_done_callback(ended)
        while running:
            await asyncio.wait(tuple(running))

    launcher = asyncio.ensure_future(launch())
    try:
        await asyncio.wait((launcher, failure), return_when=asyncio.FIRST_COMPLETED)
        if failure.done():
            failure.result()  # raises it
        launcher.result()
        every_result()
        run.finished = True
        run.elapsed_s = time.monotonic() - run.started
        if broker is None:
            # The capture ended with these sessions open. A real broker keeps an idle session at least 120 s, so
            # left open they would hold its cache's slots and refuse the sessions of the next replay.
            run.closed_sessions = await close_sessions(
                host, port, [r.open_session for r in run.streams if r.open_session], options.timeout_s)
    finally:
        for task in (launcher, *running):
            task.cancel()
        if not failure.done():
            failure.cancel()
        every_result()
        run.elapsed_s = run.elapsed_s or time.monotonic() - run.started
        if broker is not None:
            run.broker_metrics = broker.session_metrics()
            await broker.stop()
        _notes(run)
    return run


def _notes(run: ReplayRun) -> None:
    """Plain-language remarks: fallbacks the support engineer should know about."""
    fell_back = [r for r in run.streams
                 if effective_behaviour(r.stream.behaviour, run.options.sessions, 7) == SESSION
                 and r.tally.responses and r.tally.sessions_created == 0 and r.tally.incremental == 0]
    if fell_back:
        run.notes.append(f"{run.target} granted no fetch session to {len(fell_back)} session client stream(s): "
                         f"they fell back to full fetches (SessionId 0 in every response)")
    followers = sum(1 for r in run.streams if r.stream.is_follower)
    if followers:
        run.notes.append(f"{followers} follower (replica fetcher) stream(s) replayed as consumers (ReplicaId -1)")
    stopped = [r for r in run.streams if r.problem]
    for r in stopped[:5]:
        run.notes.append(f"{r.stream.label} -> {r.stream.broker}: stopped early: {r.problem}")
    timeouts = sum(r.timeouts for r in run.streams)
    if timeouts:
        run.notes.append(f"{timeouts} request(s) got no response within {run.options.timeout_s:g} s")
    target = run.prepared
    if target is not None:
        if target.created:
            filled = f", {target.written:,} record(s) written so the rebased captured offsets exist" \
                if target.written else ""
            run.notes.append(f"created {', '.join(target.created)} on {run.target}{filled}")
        if target.fetch_versions is not None:
            sent = sorted({(v, fetch_version(v, target.fetch_versions)) for v in run.captured_versions})
            moved = [f"v{a}->v{b}" for a, b in sent if a != b]
            if moved:
                run.notes.append(f"{run.target} speaks Fetch v{target.fetch_versions[0]}-v{target.fetch_versions[1]}:"
                                 f" captured versions sent as {', '.join(moved)}")
        run.notes.extend(target.notes)
        if run.closed_sessions:
            run.notes.append(f"closed {run.closed_sessions} session(s) still open at the capture's end with "
                             f"(id, -1), so they hold no slot of {run.target}'s cache")
        _eviction_note(run)
    partition_errors: Counter[int] = Counter()
    for r in run.streams:
        partition_errors.update(r.partition_errors)
    if partition_errors:
        run.notes.append("partition errors in the replay's responses: " +
                         ", ".join(f"{code}x{n}" for code, n in sorted(partition_errors.items())))
        existing = sorted(set(run.plan.topics) - set(target.created)) if target is not None else []
        if partition_errors.get(OFFSET_OUT_OF_RANGE) and existing:
            run.notes.append(f"OFFSET_OUT_OF_RANGE: {', '.join(existing)} already existed on {run.target} and may hold "
                             f"fewer records than the capture's rebased offsets (replay writes records only into "
                             f"topics it creates)")
        _leader_epoch_note(run, partition_errors)


LEADER_EPOCH_ERRORS = (74, 75)  # FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH


def _leader_epoch_note(run: ReplayRun, partition_errors: Counter[int]) -> None:
    """Why a replay's partitions fail with a leader epoch error the capture may not have: each request carries
    the captured current_leader_epoch, which names the captured cluster's leaders, and Kafka's read of a partition
    (Partition.localLogWithEpochOrThrow) refuses any epoch but its leader's. The session is updated before the
    reads, so the sessions replay as captured; only these partitions' records are missing."""
    codes = [code for code in LEADER_EPOCH_ERRORS if partition_errors.get(code)]
    if not codes:
        return
    captured = sum((run.captured_partition_errors or {}).values(), Counter())
    names = " and ".join(f"{name_of(c)} ({c})" for c in codes)
    whose = "the embedded broker's leaders are all at epoch 0" if run.options.broker is None else \
        f"{run.target}'s leaders have epochs of their own"
    run.notes.append(f"{names}{'' if any(captured.get(c) for c in codes) else ', none of them captured'}: each "
                     f"request carries the captured current_leader_epoch, which names the captured cluster's "
                     f"leaders, and {whose}; Kafka refuses a partition's read that names another epoch, so those "
                     f"partitions came back without records (their fetch sessions are updated before the reads, "
                     f"and replay as captured)")


def _eviction_note(run: ReplayRun) -> None:
    """A real broker's session cache runs on its own clock: Kafka evicts only a session unused, or created, more
    than 120 s earlier (KafkaBroker.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS, not configurable), so a replay
    that compresses time cannot reproduce the capture's evictions there (the embedded broker follows the
    captured clock instead)."""
    if not (run.options.as_fast or run.options.speed > 1):
        return
    captured = run.captured_counts().totals.evictions
    replayed = sum(r.tally.errors.get(FETCH_SESSION_ID_NOT_FOUND, 0) for r in run.streams)
    if captured > replayed:
        pace = "as fast as possible" if run.options.as_fast else f"at speed {run.options.speed:g}"
        run.notes.append(f"the capture lost {captured} session(s) to eviction; {run.target} evicts by its own clock "
                         f"(Kafka: sessions unused or created over 120 s before), which a replay {pace} compresses: "
                         f"--speed 1 keeps the capture's timing")


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, int(round(q * (len(ordered) - 1)))))
    return round(ordered[k], 3)


def divergence(run: ReplayRun, captured: Sequence[Tally]) -> list[dict]:
    """Errors the capture had that the replay did not, and the reverse, per client stream and error code."""
    out = []
    for r in run.streams:
        cap = captured[r.stream.index].errors
        live = r.tally.errors
        for code in sorted(set(cap) | set(live)):
            c, lv = cap.get(code, 0), live.get(code, 0)
            if c != lv:
                out.append({"client": r.stream.client, "client_id": r.stream.client_id, "broker": r.stream.broker,
                            "error": code, "captured": c, "replay": lv,
                            "direction": "captured_only" if c > lv else "replay_only"})
    return out
