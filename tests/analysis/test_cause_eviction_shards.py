"""FETCH_SESSION_ID_NOT_FOUND blamed on eviction only when the victim's cache shard was really full.

With --cache-slots/--cache-shards the capture is replayed through Kafka's cache engine (analysis.shadow), which
counts the sessions the broker held in the newcomer's shard when the newcomer was created. Kafka drops a session at once when a full request names it, when an incremental
request forgets its last partition, and (evidently) before issuing its id again; it keeps one after a 71 or
when its client simply starts over with (0, 0), until eviction. Each story below has victim B created,
fetching once, then a newcomer C created, then B's next incremental answered with 70.
"""

from __future__ import annotations

from builders import Capture

from fetchtool.analysis.run import analyze_items

A, B, C = ("10.0.0.1:50000", "client-a"), ("10.0.0.2:50000", "client-b"), ("10.0.0.3:50000", "client-c")
SHARD = 2147483647 // 8  # ids per shard with 8 shards (Kafka 3.8+)


def fetch(c: Capture, who, conn, **kw):
    address, client_id = who
    return c.fetch(client=address, client_id=client_id, conn=conn, **kw)


def victim_b_then_newcomer_c(c: Capture, b_id=102, c_id=103, c_request=None, meanwhile=None):
    """B is created; 121 s later (``meanwhile``, the other sessions' story, happens then) B fetches once, old
    enough for Kafka to evict it for a bigger session; C, with two partitions, is created (by ``c_request`` if
    given); returns B's failing fetch."""
    fetch(c, B, 2, epoch=0, response_session_id=b_id)
    c.t += 121
    if meanwhile is not None:
        meanwhile()
    fetch(c, B, 2, session_id=b_id, epoch=1, response_session_id=b_id)
    if c_request is None:
        fetch(c, C, 3, epoch=0, response_session_id=c_id, partitions=(("u", 0, 0), ("u", 1, 0)))
    else:
        c_request()
    return fetch(c, B, 2, session_id=b_id, epoch=2, error=70)


def not_found(analysis):
    [f] = [f for f in analysis.findings if f.code == "FETCH_SESSION_ID_NOT_FOUND"]
    return f


# -- sessions the broker had already dropped do not fill the shard ----------------------------------------------
def test_a_session_emptied_by_forgetting_its_partitions_is_not_counted():
    c = Capture()
    fetch(c, A, 1, epoch=0, response_session_id=101)
    # The broker removes a session an incremental request leaves empty, and answers with session id 0.
    fetch(c, A, 1, session_id=101, epoch=1, partitions=(), forgotten=(("t", 0),), response_session_id=0)
    victim_b_then_newcomer_c(c)
    f = not_found(analyze_items(c.exchanges, cache_slots=2, cache_shards=1))
    assert f.cause == "unknown" and "longer capture" in f.message, f.message


def test_a_session_closed_by_the_request_that_creates_the_newcomer_is_not_counted():
    # A's client sends (101, 0): Kafka removes 101 before it creates the new session 103 for the same request.
    c = Capture()
    fetch(c, A, 1, epoch=0, response_session_id=101)
    victim_b_then_newcomer_c(c, c_request=lambda: fetch(c, A, 1, session_id=101, epoch=0, response_session_id=103))
    f = not_found(analyze_items(c.exchanges, cache_slots=2, cache_shards=1))
    assert f.cause == "unknown", f.message


def test_a_session_whose_id_is_issued_again_is_not_counted():
    # The broker only issues an id no cached session holds: when C gets 101, the old 101 is gone.
    c = Capture()
    fetch(c, A, 1, epoch=0, response_session_id=101)
    victim_b_then_newcomer_c(c, c_id=101)
    a = analyze_items(c.exchanges, cache_slots=2, cache_shards=1)
    f = not_found(a)
    assert f.cause == "unknown", f.message
    assert [s.end_reason for s in a.sessions if s.client == A[0]] == ["its id was issued again to a new session"]


# -- sessions Kafka still holds do fill it -----------------------------------------------------------------------
def test_a_session_left_behind_after_a_71_and_a_fresh_full_request_still_fills_the_shard():
    # A gets 71 (the broker leaves it cached) and its client starts over with (0, 0) without naming 101, so
    # 101 stays until evicted: with 104, B and 101 the 3-slot cache is full when C arrives, and C evicts B.
    c = Capture()

    def a_starts_over():
        fetch(c, A, 1, epoch=0, response_session_id=101)
        fetch(c, A, 1, session_id=101, epoch=5, error=71)
        fetch(c, A, 1, epoch=0, response_session_id=104)
    victim_b_then_newcomer_c(c, meanwhile=a_starts_over)
    a = analyze_items(c.exchanges, cache_slots=3, cache_shards=1)
    f = not_found(a)
    assert f.cause == "evicted", f.message
    assert "by its cache of 3 slots (1 shard of 3)" in f.message and "session 103" in f.message
    assert [s.end for s in a.sessions if s.session_id == 102] == ["evicted"]
    [pressure] = [f for f in a.findings if f.code == "EVICTION_PRESSURE"]
    assert pressure.client == C[0]


def test_a_session_that_ends_after_the_newcomer_arrived_was_still_there():
    c = Capture()
    victim_b_then_newcomer_c(c, meanwhile=lambda: fetch(c, A, 1, epoch=0, response_session_id=101))
    fetch(c, A, 1, session_id=101, epoch=1, partitions=(), forgotten=(("t", 0),), response_session_id=0)
    f = not_found(analyze_items(c.exchanges, cache_slots=2, cache_shards=1))
    assert f.cause == "evicted" and "by its cache of 2 slots (1 shard of 2)" in f.message, f.message


def test_only_the_victims_shard_counts():
    # 16 slots in 8 shards: 2 per shard. Two sessions alive in shard 5 do not fill shard 3, where B and C live;
    # a second session alive in shard 3 does.
    def story(neighbour_ids):
        c = Capture()

        def neighbours():
            for n, sid in enumerate(neighbour_ids):
                fetch(c, (f"10.0.1.{n}:50000", f"other-{n}"), 10 + n, epoch=0, response_session_id=sid)
        victim_b_then_newcomer_c(c, b_id=3 * SHARD + 2, c_id=3 * SHARD + 3, meanwhile=neighbours)
        return not_found(analyze_items(c.exchanges, cache_slots=16))

    assert story([5 * SHARD + 1, 5 * SHARD + 2]).cause == "unknown"
    f = story([5 * SHARD + 1, 3 * SHARD + 1])
    assert f.cause == "evicted" and "16 slots (8 shards of 2)" in f.message, f.message


def test_a_session_answering_again_after_its_70_on_a_new_connection_is_no_restart_and_no_crash():
    # Not what a broker does (it never finds a session again once it answered 70), but a capture merged from
    # several files can show it: the restart check has no window to judge and must not fail on it.
    c = Capture()
    fetch(c, A, 1, epoch=0, response_session_id=7)
    fetch(c, A, 1, session_id=7, epoch=1, response_session_id=7)
    fetch(c, A, 2, session_id=7, epoch=2, error=70)
    fetch(c, B, 3, session_id=7, epoch=2, response_session_id=7)
    assert not_found(analyze_items(c.exchanges)).cause == "unknown"
