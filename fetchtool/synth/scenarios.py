"""Scenario scripts: each writes a small capture and returns the findings its construction implies.

The expectations come from what the script did (which request it duplicated, which session the engine's cache
evicted: read from the cache's own event log), never from running the analysis.
"""

from __future__ import annotations

from collections.abc import Callable

from fetchtool.sessions import FetchMetadata, FetchOutcome, MAX_INT, PartitionResult, SessionEvicted

from .world import Connection, JavaLikeClient, Pending, World, record_batch, topic_id

SCENARIOS: dict[str, tuple[Callable[[World], None], str]] = {}


def scenario(description: str):
    def register(fn):
        SCENARIOS[fn.__name__.replace("_", "-")] = (fn, description)
        return fn

    return register


def _parts(topic: str, n: int) -> list[tuple[str, int]]:
    return [(topic, p) for p in range(n)]


def _produce(broker, parts, records=3) -> None:
    for t, p in parts:
        broker.produce(t, p, records)


@scenario("Two Java-like consumers (Fetch v12 and v13) with healthy incremental sessions: no findings.")
def healthy(w: World) -> None:
    b = w.broker()
    a_parts, b_parts = _parts("orders", 3), _parts("payments", 2)
    _produce(b, a_parts + b_parts, 12)
    a = JavaLikeClient(w.connect(b, "10.0.0.1", 40001, "consumer-a"), a_parts, version=12)
    c = JavaLikeClient(w.connect(b, "10.0.0.2", 40002, "consumer-b"), b_parts, version=13)
    for i in range(6):
        a.poll()
        c.poll()
        if i % 2:
            _produce(b, a_parts[:1] + b_parts[:1], 4)
        w.advance(0.2)


@scenario("Eviction thrash: a 3-slot cache (1 shard); bigger newcomers evict sessions older than 120 s, a victim "
          "is refused a new session.")  # fmt: skip
def eviction_thrash(w: World) -> None:
    b = w.broker(slots=3, shards=1)
    cache = b.manager.cache
    clients = {}
    for i, name in enumerate(("svc-a", "svc-b", "svc-c")):
        clients[name] = JavaLikeClient(w.connect(b, f"10.0.1.{i + 1}", 41000 + i, name), _parts(name, 2))
        clients[name].poll()
    w.advance(130)  # older than the 120 s eviction protection, touched again below
    for c in clients.values():
        c.poll()
    cache.drain_events()  # only the evictions the newcomers below cause are this scenario's ground truth
    big = [("big-d", 5, "10.0.1.10", 41010), ("big-e", 6, "10.0.1.11", 41011)]
    for n, (name, size, ip, port) in enumerate(big):
        newcomer = JavaLikeClient(w.connect(b, ip, port, name), _parts(name, size))
        newcomer.poll()
        evicted = [e.session_id for e in cache.drain_events() if isinstance(e, SessionEvicted)]
        assert len(evicted) == 1, evicted
        victim_name = next(k for k, c in clients.items() if c.handler.next_metadata.session_id == evicted[0])
        victim = clients.pop(victim_name)
        for c in clients.values():  # the survivors keep fetching: they were in the cache all along
            c.poll()
        req = victim.poll()  # incremental on the evicted session
        assert req.answer.error_code == 70
        w.expect("FETCH_SESSION_ID_NOT_FOUND", "evicted", req, victim.conn)
        if n == 0:
            again = victim.poll()  # (0, 0): no free slot, nothing evictable (equal size) -> session id 0
            assert again.answer.session_id == 0 and again.answer.error_code == 0
            w.expect("CACHE_FULL", None, again, victim.conn)
        newcomer.poll()
        clients[name] = newcomer
    w.expect("EVICTION_PRESSURE", None)


@scenario("An epoch retried after a lost response: the broker processed epoch N, the client resent it on a new "
          "connection.")  # fmt: skip
def epoch_retry(w: World) -> None:
    b = w.broker()
    parts = _parts("events", 2)
    _produce(b, parts, 10)
    conn = w.connect(b, "10.0.2.1", 42000, "retrying-client")
    c = JavaLikeClient(conn, parts)
    for _ in range(3):
        c.poll()
    req, _ = c.request()
    conn.respond(req, lost=True)  # the broker answered; the capture (and the client) never saw it
    w.expect("RESPONSE_MISSING", "last_on_connection", conn=conn, request_frame=req.request_frame)
    w.advance(30)
    conn.close(rst="client")
    conn2 = w.connect(b, "10.0.2.1", 42001, "retrying-client")
    dup = conn2.fetch(req.meta, {})  # the same (session id, epoch) again
    assert dup.answer.error_code == 71
    w.expect("INVALID_FETCH_SESSION_EPOCH", "duplicate_request", dup, conn2)
    c.conn = conn2
    c.handler.handle_error()  # back to (id, 0): close and re-create
    for _ in range(2):
        c.poll()


@scenario("Two fetches of one session in flight at once on one connection (a client that sends before it has "
          "processed the previous response).")  # fmt: skip
def concurrent_fetch(w: World) -> None:
    b = w.broker()
    parts = _parts("clicks", 2)
    _produce(b, parts, 10)
    conn = w.connect(b, "10.0.3.1", 43000, "racy-consumer")
    c = JavaLikeClient(conn, parts)
    c.poll()
    c.poll()
    first, _ = c.request()
    second = conn.request(first.meta, {})  # the heartbeat thread's fetch, same epoch
    conn.respond(first)
    conn.respond(second)
    assert second.answer.error_code == 71
    w.expect("INVALID_FETCH_SESSION_EPOCH", "concurrent_requests", second, conn)
    c.handle(first)
    c.poll()


@scenario("A broker restart: every connection resets and every session fails once with FETCH_SESSION_ID_NOT_FOUND.")
def broker_restart(w: World) -> None:
    b = w.broker()
    clients = []
    for i in range(3):
        parts = _parts(f"topic{i}", 2)
        _produce(b, parts, 10)
        clients.append(JavaLikeClient(w.connect(b, f"10.0.4.{i + 1}", 44000 + i, f"worker-{i}"), parts))
    for _ in range(2):
        for c in clients:
            c.poll()
    for c in clients:
        c.conn.close(rst="server")
    b.restart()
    w.advance(5)
    for i, c in enumerate(clients):
        c.conn = w.connect(b, f"10.0.4.{i + 1}", 44100 + i, f"worker-{i}")
        req = c.poll()  # this client keeps its session across the reconnect (as franz-go does)
        assert req.answer.error_code == 70
        w.expect("FETCH_SESSION_ID_NOT_FOUND", "broker_restart", req, c.conn)
    for c in clients:
        c.poll()
        c.poll()


@scenario("A client that opens a new session on every fetch and ignores it (the old Sarama bug, IBM/sarama#1644).")
def sarama_churn(w: World) -> None:
    b = w.broker()
    parts = _parts("logs", 3)
    _produce(b, parts, 50)
    conn = w.connect(b, "10.0.5.1", 45000, "sarama")
    for _ in range(8):
        conn.fetch(FetchMetadata.INITIAL, {tp: 0 for tp in parts}, version=7)
        w.advance(0.5)
    w.expect("SESSION_CHURN", None, conn=conn)


@scenario("A sessionless client (epoch -1, like librdkafka) fetching 200 partitions every time.")
def sessionless_many(w: World) -> None:
    b = w.broker()
    parts = _parts("metrics", 200)
    conn = w.connect(b, "10.0.6.1", 46000, "rdkafka")
    for _ in range(2):
        conn.fetch(FetchMetadata.LEGACY, {tp: 0 for tp in parts}, version=11)
    w.expect("SESSIONLESS_CLIENT", None, conn=conn)


def _near_max(w: World, name: str, port: int):
    """A session fast-forwarded (before the capture) to epoch MAX_INT - 2; the capture starts mid-stream."""
    b = w.broker()
    parts = _parts(name, 2)
    _produce(b, parts, 10)
    w.silent = True
    conn = w.connect(b, "10.0.7.1", port, name)
    c = JavaLikeClient(conn, parts)
    c.poll()
    sid = c.handler.next_metadata.session_id
    session = b.manager.cache.get(sid)
    assert session is not None  # the poll above created it
    session.epoch = MAX_INT - 2  # what 2^31 fetches would have done
    c.handler.next_metadata = FetchMetadata(sid, MAX_INT - 2)
    w.silent = False
    for _ in range(3):
        c.poll()
    return b, conn, c, sid


@scenario("Epoch wrap done right: after 2147483647 the client sends epoch 1 (capture starts mid-stream).")
def epoch_wrap_ok(w: World) -> None:
    _, _, c, _ = _near_max(w, "wrap-ok", 47000)
    for _ in range(3):
        c.poll()


@scenario("Epoch wrap done wrong: after 2147483647 the client overflows to -2147483648.")
def epoch_wrap_bad(w: World) -> None:
    _, conn, c, sid = _near_max(w, "wrap-bad", 47100)
    bad = conn.fetch(FetchMetadata(sid, -(2**31)), {})
    assert bad.answer.error_code == 71
    w.expect("INVALID_FETCH_SESSION_EPOCH", "bad_wrap", bad, conn)
    c.handler.next_metadata = FetchMetadata(sid, 0)
    c.poll()
    c.poll()


@scenario("A session created with Fetch v13 (topic ids) continued with Fetch v12: FETCH_SESSION_TOPIC_ID_ERROR.")
def topic_id_switch(w: World) -> None:
    b = w.broker()
    parts = _parts("inventory", 2)
    _produce(b, parts, 10)
    conn = w.connect(b, "10.0.8.1", 48000, "upgrading-consumer")
    c = JavaLikeClient(conn, parts, version=13)
    c.poll()
    c.poll()
    meta = c.handler.next_metadata
    bad = conn.fetch(meta, {parts[0]: 5}, version=12)
    assert bad.answer.error_code == 106
    w.expect("FETCH_SESSION_TOPIC_ID_ERROR", "version_mismatch", bad, conn)
    c.handler.next_metadata = FetchMetadata(meta.session_id, 0)
    c.poll()


@scenario("A capture that starts mid-stream: a response whose request was before the capture, then live sessions.")
def midstream(w: World) -> None:
    b = w.broker()
    parts = _parts("stream", 3)
    _produce(b, parts, 20)
    w.silent = True
    conn = w.connect(b, "10.0.9.1", 49000, "long-lived")
    c = JavaLikeClient(conn, parts)
    c.poll()
    c.poll()
    req, _ = c.request()
    w.silent = False
    conn.respond(req)  # its request is not in the capture
    w.expect("REQUEST_MISSING", None, conn=conn, response_frame=req.response_frame)
    c.handle(req)
    for _ in range(4):
        c.poll()
        _produce(b, parts[:1], 2)


@scenario("KIP-74 starvation on an old broker (before KAFKA-12330): partition 2 has data but full responses never "
          "include it.")  # fmt: skip
def starvation(w: World) -> None:
    b = w.broker()
    parts = _parts("busy", 3)
    conn = w.connect(b, "10.0.10.1", 50000, "starved-consumer")
    blob = record_batch(5)
    offsets = {tp: 0 for tp in parts}
    hw = 1000
    for i in range(6):
        req = conn.request(FetchMetadata.LEGACY, dict(offsets), version=11, max_bytes=2 * len(blob))
        # The old broker fills MaxBytes with partitions 0 and 1 and reports partition 2's data without reading it.
        picks = []
        for _topic, p in parts:
            tip = next(k for k in req.fetch_data if k.partition == p)
            size = len(blob) if p < 2 else 0
            picks.append((tip, PartitionResult(high_watermark=hw, last_stable_offset=hw, log_start_offset=0,
                                               records_size=size)))  # fmt: skip
        records = {tip: blob for tip, r in picks if r.records_size}
        conn.respond(req, outcome=FetchOutcome(0, 0, 0, tuple(picks)), records=records)
        if i == 4:
            w.expect("PARTITION_STARVATION", None, conn=conn, response_frame=req.response_frame)
        for t, p in parts[:2]:
            offsets[(t, p)] += 5


@scenario("FetchSnapshot (KIP-630) transfers: one skips ahead of the transferred position, one gets "
          "SNAPSHOT_NOT_FOUND (98).")  # fmt: skip
def snapshot_errors(w: World) -> None:
    b = w.broker(port=9093)
    conn = w.connect(b, "10.0.11.2", 51000, "raft-follower-2")
    meta = "__cluster_metadata"
    conn.snapshot(meta, 0, (100, 3), 0, size=2500, chunk=1000)
    conn.snapshot(meta, 0, (100, 3), 1000, size=2500, chunk=1000)
    req_frame, resp_frame = conn.snapshot(meta, 0, (100, 3), 2300, size=2500, chunk=1000)  # skipped 2000..2300
    w.expect("SNAPSHOT_ERROR", None, conn=conn, request_frame=req_frame, response_frame=resp_frame)
    req_frame, resp_frame = conn.snapshot(meta, 0, (200, 4), 0, size=0, chunk=1000, error=98)
    w.expect("SNAPSHOT_ERROR", None, conn=conn, request_frame=req_frame, response_frame=resp_frame)
    conn.snapshot(meta, 0, (180, 4), 0, size=1500, chunk=1000)
    conn.snapshot(meta, 0, (180, 4), 1000, size=1500, chunk=1000)


@scenario("A broker that never keeps sessions (no cache slots, like tansu or noida-db): every (0, 0) is refused, "
          "and one odd incremental fetch is answered with session id 0 and no error.")  # fmt: skip
def sessions_never_granted(w: World) -> None:
    b = w.broker(slots=0, shards=1)
    parts = _parts("audit", 3)
    _produce(b, parts, 6)
    consumers = [JavaLikeClient(w.connect(b, f"10.0.13.{i + 1}", 53000 + i, f"audit-{i}"), parts) for i in range(2)]
    first = None
    for _ in range(4):
        for c in consumers:
            req = c.poll()
            assert req.answer.session_id == 0 and req.answer.error_code == 0  # refused: no slot, ever
            first = first or req
        w.advance(0.5)
    w.expect("SESSIONS_NOT_GRANTED", None, first, consumers[0].conn)
    # A client naming a session this broker never granted: Kafka would answer 70; this broker says nothing.
    odd = w.connect(b, "10.0.13.9", 53009, "odd-client")
    req = odd.request(FetchMetadata(777, 1), {tp: 0 for tp in parts})
    odd.respond(req, outcome=FetchOutcome(0, 0, 0, ()))
    w.expect("SESSION_DROPPED_WITHOUT_ERROR", None, req, odd)


@scenario("A client asking for a new session on every fetch (0, 0) fills a 4-slot cache: its first sessions are "
          "granted and never used, the rest refused (like @platformatic/kafka before 2.3.0).")  # fmt: skip
def churn_fills_cache(w: World) -> None:
    b = w.broker(slots=4, shards=1)
    steady_parts, churn_parts = _parts("orders", 2), _parts("clicks", 2)
    _produce(b, steady_parts + churn_parts, 8)
    steady = JavaLikeClient(w.connect(b, "10.0.14.1", 54000, "steady-consumer"), steady_parts)
    conn = w.connect(b, "10.0.14.2", 54001, "churning-consumer")
    granted = refused = 0
    first_refused = None
    for _ in range(12):
        steady.poll()
        req = conn.fetch(FetchMetadata.INITIAL, {tp: 0 for tp in churn_parts})
        if req.answer.session_id:
            granted += 1
        else:
            refused += 1
            first_refused = first_refused or req
        w.advance(0.5)
    assert (granted, refused) == (3, 9)  # the steady consumer holds the fourth slot; equal sizes evict nothing
    w.expect("SESSION_CHURN", None, conn=conn)
    w.expect("CACHE_FULL", None, first_refused, conn)


@scenario("A sessionless client (epoch -1, like librdkafka) fetching 20 partitions with little data: no session, "
          "so every fetch lists them all both ways.")  # fmt: skip
def sessionless_few(w: World) -> None:
    b = w.broker()
    parts = _parts("inventory", 20)
    _produce(b, parts[:2], 2)
    conn = w.connect(b, "10.0.15.1", 55000, "rdkafka-inventory")
    for _ in range(6):
        conn.fetch(FetchMetadata.LEGACY, {tp: 0 for tp in parts}, version=11)
        w.advance(0.5)
    w.expect("SESSIONLESS_CLIENT", None, conn=conn)


@scenario("A broker drops a live session without an error (session id 0 while partitions remain); another client "
          "empties its own session, which Kafka closes with session id 0 too: only the first is a finding.")  # fmt: skip
def session_dropped(w: World) -> None:
    b = w.broker()
    a_parts, e_parts = _parts("payments", 3), _parts("refunds", 2)
    _produce(b, a_parts + e_parts, 6)
    victim = JavaLikeClient(w.connect(b, "10.0.16.1", 56000, "payments-consumer"), a_parts)
    leaver = JavaLikeClient(w.connect(b, "10.0.16.2", 56001, "refunds-consumer"), e_parts)
    for _ in range(3):
        victim.poll()
        leaver.poll()
    req, _ = victim.request()
    victim.conn.respond(req, outcome=FetchOutcome(0, 0, 0, ()))  # the broken broker's answer
    victim.handle(req)
    w.expect("SESSION_DROPPED_WITHOUT_ERROR", None, req, victim.conn)
    leaver.positions.clear()  # unassigned: the next fetch forgets every partition
    emptied = leaver.poll()
    assert emptied.answer.session_id == 0 and emptied.answer.error_code == 0  # Kafka's own way to end it
    victim.poll()
    victim.poll()


@scenario("A broker that answers empty fetches at once instead of holding them for MaxWaitMs, beside one that holds "
          "them as Kafka does: idle consumers poll the first in a loop.")  # fmt: skip
def max_wait_ignored(w: World) -> None:
    hasty = w.broker("10.0.0.100")
    patient = w.broker("10.0.0.101", holds_empty_fetches=True)
    idle = [JavaLikeClient(w.connect(hasty, f"10.0.9.{i}", 49000 + i, f"idle-{i}"), _parts(f"quiet-{i}", 2))
            for i in (1, 2)]  # fmt: skip
    first = [c.poll() for _ in range(15) for c in idle][0]
    w.expect("MAX_WAIT_IGNORED", None, request_frame=first.request_frame, response_frame=first.response_frame,
             broker=str(hasty.endpoint))  # fmt: skip
    waiting = JavaLikeClient(w.connect(patient, "10.0.9.3", 49003, "idle-3"), _parts("quiet-3", 2))
    for _ in range(25):
        waiting.poll()


@scenario("A client fetching with MaxWaitMs 0 from an idle topic: every answer is empty and immediate, so it "
          "polls in a loop; a neighbour with MaxWaitMs 500 waits.")  # fmt: skip
def max_wait_zero(w: World) -> None:
    b = w.broker(holds_empty_fetches=True)
    spinner = JavaLikeClient(w.connect(b, "10.0.8.1", 48001, "spinner"), _parts("idle", 2), max_wait_ms=0)
    first = [spinner.poll() for _ in range(25)][0]
    w.expect("MAX_WAIT_ZERO", None, conn=spinner.conn, request_frame=first.request_frame,
             response_frame=first.response_frame)  # fmt: skip
    patient = JavaLikeClient(w.connect(b, "10.0.8.2", 48002, "patient"), _parts("idle", 2))
    for _ in range(5):
        patient.poll()


@scenario("After a leader change 13 fetches in a row get FENCED_LEADER_EPOCH and the client re-fetches 20 ms after "
          "each, with no backoff, then recovers (its partitions recover: no persisting-error finding).")  # fmt: skip
def fetch_error_loop(w: World) -> None:
    b = w.broker(holds_empty_fetches=True)
    parts = _parts("payments", 3)
    _produce(b, parts, 10)
    c = JavaLikeClient(w.connect(b, "10.0.7.1", 47001, "hasty-consumer"), parts)
    for _ in range(3):
        c.poll()
    b.errors = {tp: 74 for tp in parts}  # FENCED_LEADER_EPOCH: the client's leader epoch is old
    loop = []
    for _ in range(13):
        loop.append(c.poll())
        w.advance(0.02)  # 20 ms: no retry.backoff.ms
    assert all(p.answer.partitions and all(r.error_code == 74 for _t, r in p.answer.partitions) for p in loop)
    w.expect("FETCH_ERROR_LOOP", None, conn=c.conn, request_frame=loop[1].request_frame,
             response_frame=loop[1].response_frame)  # fmt: skip
    b.errors = {}
    _produce(b, parts, 5)
    for _ in range(3):
        c.poll()


@scenario("Three partitions of a deleted topic fail with UNKNOWN_TOPIC_OR_PARTITION on every fetch (two "
          "seconds apart, so no loop) and never recover; another partition's NOT_LEADER_OR_FOLLOWER clears at "
          "once.")  # fmt: skip
def partition_errors(w: World) -> None:
    b = w.broker(holds_empty_fetches=True)
    gone, orders = _parts("gone", 3), _parts("orders", 2)
    _produce(b, orders, 20)
    b.errors = {tp: 3 for tp in gone}
    b.errors[("orders", 1)] = 6
    c = JavaLikeClient(w.connect(b, "10.0.6.1", 46001, "stale-consumer"), orders + gone)
    first = c.poll()
    del b.errors[("orders", 1)]  # the leader is back here by the next fetch
    w.advance(2.0)
    for _ in range(3):
        c.poll()
        w.advance(2.0)
    w.expect("PARTITION_ERROR_PERSISTS", None, conn=c.conn, request_frame=first.request_frame,
             response_frame=first.response_frame)  # fmt: skip


def generate(name: str, path) -> list[dict]:
    """Write scenario `name` to `path`; return its expected findings."""
    fn, _ = SCENARIOS[name]
    w = World(path)
    try:
        fn(w)
    finally:
        w.close()
    return w.expected


__all__ = ["SCENARIOS", "generate", "World", "Connection", "Pending", "topic_id"]
