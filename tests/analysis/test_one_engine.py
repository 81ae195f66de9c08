"""Issue #15: every session's life and every 70's cause read from Kafka's own cache engine, replayed over the
capture (fetchtool.analysis.diagnosis.shadow), as real Kafka 4.3.1 brokers lived them (captures/kafka/ and its logs).

Each story is one that the analysis got wrong before, told the way a support engineer's capture shows it.
Kafka's rules the stories rely on: a session is created when its full fetch is ANSWERED (after the long poll),
in the shard its id names (8 shards of 268435455 ids since 3.8); one eviction per creation; the shard's least
recently used session goes if unused for more than 120 s, else the newcomer may evict a session older than
120 s (as of its last use) with fewer partitions.
"""

from __future__ import annotations

from dataclasses import replace

from builders import Capture

from fetchtool.analysis.run import analyze_items

SHARD = 2147483647 // 8
WIDE = (("w", 0, 0), ("w", 1, 0))  # a newcomer with more partitions than the one-partition consumers


def fetch(c: Capture, who: str, conn: int, **kw):
    return c.fetch(client=f"10.0.0.{conn}:5000{conn % 10}", client_id=who, conn=conn, **kw)


def keep_fetching(c: Capture, who: str, conn: int, sid: int, epochs: range, every: float = 10.0) -> None:
    for epoch in epochs:
        c.t += every
        fetch(c, who, conn, session_id=sid, epoch=epoch, response_session_id=sid)


def answered_later(c: Capture, ex, seconds: float) -> None:
    """The broker answers ``ex`` only after a long poll of ``seconds`` (the exchanges stay in request order)."""
    i = c.exchanges.index(ex)
    c.exchanges[i] = replace(ex, response_ts=ex.ts + seconds, response_frame=ex.response_frame + 1000)


def the(analysis, code: str):
    [f] = [f for f in analysis.findings if f.code == code]
    return f


def session(analysis, sid: int):
    [s] = [s for s in analysis.sessions if s.session_id == sid]
    return s


# -- Kafka creates the session when it answers: a long-polled full fetch evicts a session used in between ------
def victim_evicted_by_a_long_polled_newcomer() -> Capture:
    """victim (shard 0) fetches for 130 s; newcomer's full fetch (shard 0, two partitions) is sent, the victim
    fetches once more while it waits, and only then is it answered: the victim's next fetch gets 70."""
    c = Capture()
    fetch(c, "victim", 1, epoch=0, response_session_id=5)
    keep_fetching(c, "victim", 1, 5, range(1, 14))
    c.t += 1
    newcomer = fetch(c, "newcomer", 2, epoch=0, response_session_id=7, partitions=WIDE)
    fetch(c, "victim", 1, session_id=5, epoch=14, response_session_id=5)  # sent while the newcomer waits
    answered_later(c, newcomer, 0.9)
    c.t += 2
    fetch(c, "victim", 1, session_id=5, epoch=15, error=70)
    return c


def test_a_newcomer_answered_after_the_victims_last_fetch_evicted_it_given_the_cache_size():
    a = analyze_items(victim_evicted_by_a_long_polled_newcomer().exchanges, cache_slots=8, cache_shards=8)
    f = the(a, "FETCH_SESSION_ID_NOT_FOUND")
    assert f.cause == "evicted" and "session 7 was created" in f.message, f.message
    assert session(a, 5).end == "evicted" and "session 7 of newcomer" in session(a, 5).end_reason
    assert the(a, "EVICTION_PRESSURE").client_id == "newcomer"


def test_the_same_eviction_is_found_without_the_cache_size_as_the_only_size_the_70_allows():
    a = analyze_items(victim_evicted_by_a_long_polled_newcomer().exchanges)
    f = the(a, "FETCH_SESSION_ID_NOT_FOUND")
    assert f.cause == "evicted" and "session 7 was created" in f.message, f.message
    assert "every cache size that fits the capture" in f.message  # the size was inferred, and it says so


def test_a_session_created_in_another_shard_is_never_named_the_evictor():
    # 'other' gets a session in shard 5 while the victim (shard 0) waits for its eviction by the newcomer
    c = Capture()
    fetch(c, "victim", 1, epoch=0, response_session_id=5)
    keep_fetching(c, "victim", 1, 5, range(1, 14))
    fetch(c, "other", 3, epoch=0, response_session_id=5 * SHARD + 9, partitions=(("o", 0, 0), ("o", 1, 0),
                                                                             ("o", 2, 0)))
    fetch(c, "newcomer", 2, epoch=0, response_session_id=7, partitions=WIDE)
    fetch(c, "victim", 1, session_id=5, epoch=14, error=70)
    f = the(analyze_items(c.exchanges), "FETCH_SESSION_ID_NOT_FOUND")
    assert f.cause == "evicted" and "session 7 was created" in f.message, f.message


# -- the cache never holds more than it can ------------------------------------------------------------------
def test_sessions_a_churning_client_never_used_are_evicted_as_stale_and_not_counted_live():
    c = Capture()
    for n in range(16):  # one session per shard, then 130 s later one more per shard
        if n == 8:
            c.t += 130
        fetch(c, "churner", 1, epoch=0, response_session_id=(n % 8) * SHARD + 100 + n)
    a = analyze_items(c.exchanges, cache_slots=8, cache_shards=8)
    [broker] = a.brokers
    assert broker.max_live_sessions == 8
    first = [s for s in a.sessions if s.session_id % SHARD < 108]
    assert {s.end for s in first} == {"evicted"}
    assert all("stale" in s.end_reason for s in first), [s.end_reason for s in first]


# -- a paused consumer: the idle client is the cause, not the cache size --------------------------------------
def paused_consumer(then) -> Capture:
    """paused (shard 3) fetches, then its process is paused for ~164 s; 144 s into the pause a newcomer gets a
    session in shard 3; when paused resumes it sends ``then``."""
    c = Capture()
    fetch(c, "paused", 1, epoch=0, response_session_id=3 * SHARD + 1)
    keep_fetching(c, "paused", 1, 3 * SHARD + 1, range(1, 3))
    c.t += 144
    fetch(c, "newcomer", 2, epoch=0, response_session_id=3 * SHARD + 2)
    keep_fetching(c, "newcomer", 2, 3 * SHARD + 2, range(1, 3))
    then(c)
    return c


def test_a_paused_consumers_session_evicted_as_stale_is_not_closed_by_its_later_full_fetch():
    c = paused_consumer(lambda c: fetch(c, "paused", 3, session_id=3 * SHARD + 1, epoch=0))
    for a in (analyze_items(c.exchanges, cache_slots=8, cache_shards=8), analyze_items(c.exchanges)):
        s = session(a, 3 * SHARD + 1)
        assert s.end == "evicted" and "stale (idle 144.0 s)" in s.end_reason, (s.end, s.end_reason)
        f = the(a, "STALE_EVICTION")
        assert f.client_id == "paused" and "not used it for 144.0 s" in f.message and "paused" in f.advice


def test_a_70_after_a_stale_eviction_blames_the_idle_client_not_the_cache_size():
    c = paused_consumer(lambda c: fetch(c, "paused", 1, session_id=3 * SHARD + 1, epoch=3, error=70))
    a = analyze_items(c.exchanges)
    f = the(a, "FETCH_SESSION_ID_NOT_FOUND")
    assert f.cause == "evicted" and "stale" in f.message and "144.0 s" in f.message, f.message
    assert "paused" in f.advice and "max.incremental.fetch.session.cache.slots" not in f.advice, f.advice
    assert not [f for f in a.findings if f.code == "EVICTION_PRESSURE"]


# -- a broker lost with its sessions: the story is in the connections -----------------------------------------
def test_sessions_lost_with_their_broker_are_lost_not_closed_by_the_clients_reconnect():
    c = Capture()
    for n in (1, 2, 3):
        fetch(c, f"java-{n}", n, epoch=0, response_session_id=10 + n)
        fetch(c, f"java-{n}", n, session_id=10 + n, epoch=1, response_session_id=10 + n)
    for n in (1, 2, 3):  # the broker is killed: every connection cut with a fetch in flight
        fetch(c, f"java-{n}", n, session_id=10 + n, epoch=2, missing_response=True)
    c.t += 20
    for n in (1, 2, 3):  # the Java client answers a lost connection with (old id, 0) on a new one
        fetch(c, f"java-{n}", 10 + n, session_id=10 + n, epoch=0, response_session_id=20 + n)
    c.t += 5
    a = analyze_items(c.exchanges)
    assert {session(a, 10 + n).end for n in (1, 2, 3)} == {"lost"}
    lost = the(a, "BROKER_LOST")
    assert lost.count == 3 and "3 request(s) in flight" in lost.message, lost.message
    assert not [f for f in a.findings if f.code == "RESPONSE_MISSING"]  # the capture did not lose them


def test_one_client_going_away_is_not_a_broker_lost():
    c = Capture()
    fetch(c, "java-1", 1, epoch=0, response_session_id=11)
    fetch(c, "java-2", 2, epoch=0, response_session_id=12)
    fetch(c, "java-1", 1, session_id=11, epoch=1, missing_response=True)
    c.t += 20
    fetch(c, "java-2", 2, session_id=12, epoch=1, response_session_id=12)
    a = analyze_items(c.exchanges)
    assert not [f for f in a.findings if f.code == "BROKER_LOST"]
    assert session(a, 11).end == "alive"


# -- a throttled answer is not an emptied session ------------------------------------------------------------
def test_a_throttled_answer_does_not_end_the_session():
    c = Capture()
    fetch(c, "java", 1, epoch=0, response_session_id=9)
    fetch(c, "java", 1, session_id=9, epoch=1, response_session_id=0, throttle=250, response=[])
    fetch(c, "java", 1, session_id=9, epoch=1, response_session_id=9)
    s = session(analyze_items(c.exchanges), 9)
    assert s.end == "alive", (s.end, s.end_reason)


# -- 106: the evidence tells a client switching Fetch versions from a rolling upgrade -------------------------
def test_a_client_that_switches_fetch_versions_on_its_own_reconnect_is_not_a_rolling_upgrade():
    c = Capture()
    old, new = "10.0.0.1:50001", "10.0.0.1:50002"
    c.fetch(client=old, conn=1, client_id="java", version=18, epoch=0, response_session_id=9)
    c.fetch(client=old, conn=1, client_id="java", version=18, session_id=9, epoch=1, response_session_id=9)
    # its reconnect's full fetch is a v12 one, granted a session without topic ids; the next fetch is v18 again
    c.fetch(client=new, conn=2, client_id="java", version=12, session_id=9, epoch=0, response_session_id=10)
    c.fetch(client=new, conn=2, client_id="java", version=18, session_id=10, epoch=1, error=106)
    f = the(analyze_items(c.exchanges), "FETCH_SESSION_TOPIC_ID_ERROR")
    assert f.cause == "client_version_switch", f.message
    assert "had used Fetch v18 with this broker before" in f.message and "new connection" in f.message
    assert "upgrade" not in f.advice.replace("not a rolling upgrade", ""), f.advice


# -- followers and KRaft voters --------------------------------------------------------------------------------
def test_a_followers_session_is_shown_with_its_replica_id_and_outranks_a_consumers():
    # a 1-slot shard: the follower's new session evicts the consumer's young one (privileged beats unprivileged)
    c = Capture()
    fetch(c, "consumer", 1, epoch=0, response_session_id=5)
    fetch(c, "consumer", 1, session_id=5, epoch=1, response_session_id=5)
    follower = fetch(c, "broker-2-fetcher-0", 2, epoch=0, response_session_id=6)
    c.exchanges[-1] = replace(follower, replica_id=2)
    fetch(c, "consumer", 1, session_id=5, epoch=2, error=70)
    a = analyze_items(c.exchanges, cache_slots=8, cache_shards=8)
    assert session(a, 6).owner == "broker-2-fetcher-0@10.0.0.2:50002 (follower, replica 2)"
    f = the(a, "FETCH_SESSION_ID_NOT_FOUND")
    assert f.cause == "evicted" and "a follower's priority" in f.message, f.message


def test_kraft_voter_fetches_are_left_out_of_savings_and_session_findings():
    c = Capture()
    for n in range(3):
        ex = c.fetch(client="10.0.0.3:40000", client_id="raft-client-3", conn=3, partitions=(("__cluster_metadata", 0, n),))
        c.exchanges[-1] = replace(ex, replica_id=3)
    fetch(c, "java", 1, epoch=0, response_session_id=5)
    a = analyze_items(c.exchanges)
    assert [p["client_id"] for p in a.savings["per_client"]] == ["java"]
    assert not [f for f in a.findings if f.client_id == "raft-client-3"]


# -- a session alive before the capture: what it had cached is unknown ------------------------------------------
def test_a_partition_first_seen_in_a_session_begun_before_the_capture_is_only_added_when_shown_new():
    c = Capture()
    # the follower's session predates the capture: partition t-2 (fetched up to offset 7) may be cached already
    fetch(c, "broker-2-fetcher-0", 1, session_id=42, epoch=14, response_session_id=42, partitions=(("t", 2, 7),))
    # a partition with nothing fetched yet is one the fetcher starts: new to the session
    fetch(c, "broker-2-fetcher-0", 1, session_id=42, epoch=15, response_session_id=42, partitions=(("new", 0, 0),))
    steps = session(analyze_items(c.exchanges), 42).steps
    assert [(st.epoch, st.added) for st in steps] == [(14, 0), (15, 1)]
