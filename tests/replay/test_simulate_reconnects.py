"""simulate drives each client as Kafka's consumer does across lost connections, unanswered fetches and throttling.

Kafka's consumer keeps one FetchSessionHandler per broker node for its whole life (AbstractFetch.sessionHandlers):
when a connection is lost under a fetch, that fetch fails (handleFetchFailure -> handleError) and the next
request, on the new connection, is (id, 0): it closes the old session on the broker and opens a new one. A
simulation that gave each connection a fresh client would send (0, 0) instead and leave the old session in the
cache, where it takes a slot (a refusal) or is evicted (an eviction Kafka never did).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fetchtool.replay.clients import ClientModel
from fetchtool.replay.loading import load_plan
from fetchtool.replay.plan import build_plan
from fetchtool.replay.simulate import SimConfig, simulate
from fetchtool.replay.tally import captured_counts
from fetchtool.sessions.metadata import FetchMetadata

from .scenario import Consumer, req

CAPTURES = Path(__file__).resolve().parents[2] / "captures" / "kafka"


def _by_conn(plan, result):
    return {s.client: result.streams[s.index] for s in plan.streams}


def _lost_connection_then_reconnect():
    """Client "app" on 10.0.0.1 gets session 101; at t=2 its fetch is never answered (the connection dies); at
    t=5 it is back from another port with (101, 0), as the Java client does, and gets session 202."""
    first = Consumer("10.0.0.1:40001", conn=1, client_id="app")
    first.fetch(0.0, 0, 0, [req("orders", 0)], response_session_id=101)
    first.fetch(1.0, 101, 1, [], response=[], response_session_id=101)
    first.fetch(2.0, 101, 2, [], answered=False)
    again = Consumer("10.0.0.1:40555", conn=2, client_id="app")
    again.fetch(5.0, 101, 0, [req("orders", 0)], response_session_id=202)
    again.fetch(6.0, 202, 1, [], response=[], response_session_id=202)
    again.fetch(7.0, 202, 2, [], response=[], response_session_id=202)
    return build_plan(first.exchanges + again.exchanges)


def test_a_reconnecting_client_is_linked_to_its_previous_connection():
    plan = _lost_connection_then_reconnect()
    first, again = plan.streams
    assert (first.follows, again.follows) == (None, first.index)


def test_a_reconnecting_client_closes_its_old_session_instead_of_leaving_it_in_a_one_slot_cache():
    plan = _lost_connection_then_reconnect()
    result = simulate(plan, SimConfig(cache_slots=1, cache_shards=1))
    conns = _by_conn(plan, result)
    again = conns["10.0.0.1:40555"]
    # (101, 0) freed the slot: the new connection gets its session and goes incremental, as in the capture
    assert (again.sessions_created, again.incremental, dict(again.errors)) == (1, 2, {})
    assert result.totals.evictions == 0
    # the fetch the connection died under was never answered
    assert (conns["10.0.0.1:40001"].requests, conns["10.0.0.1:40001"].responses) == (3, 2)


def test_a_reconnecting_client_does_not_make_its_old_session_a_stale_eviction():
    # Unused for 3 s with eviction_ms=2000, the old session would be stale when the client comes back: a fresh
    # (0, 0) client would evict it; (101, 0) closes it.
    plan = _lost_connection_then_reconnect()
    result = simulate(plan, SimConfig(cache_slots=1, cache_shards=1, eviction_ms=2000))
    assert result.totals.evictions == 0 and result.totals.sessions_created == 2


def test_the_client_sends_id_0_on_its_new_connection_as_kafkas_handler_does():
    # What simulate does at the two steps, on the model both connections share.
    plan = _lost_connection_then_reconnect()
    first, again = plan.streams
    model = ClientModel(first.behaviour)
    for fetch in first.fetches[:2]:
        model.request_parts(fetch)
        model.response(fetch.version, 0, 101, 0, [] if fetch.epoch else [(w.key, None) for w in fetch.wanted])
    assert model.request_parts(first.fetches[2])[0] == FetchMetadata(101, 2)
    model.error()       # the connection died under it
    assert model.request_parts(again.fetches[0])[0] == FetchMetadata(101, 0)


def test_a_fetch_answered_on_the_same_connection_was_answered_although_the_capture_missed_it():
    # A Java client closes the connection on a timeout, so a next fetch on the same connection means it got the
    # answer: its session goes on incrementally.
    c = Consumer("10.0.0.1:40001", conn=1, client_id="app")
    c.fetch(0.0, 0, 0, [req("orders", 0)], response_session_id=101)
    c.fetch(1.0, 101, 1, [], answered=False)
    c.fetch(2.0, 101, 2, [], response=[], response_session_id=101)
    c.fetch(3.0, 101, 3, [], response=[], response_session_id=101)
    result = simulate(build_plan(c.exchanges), SimConfig())
    assert (result.totals.incremental, dict(result.totals.errors), result.totals.responses) == (3, {}, 4)


def test_a_client_that_restarts_its_session_after_an_unanswered_fetch_sends_id_0():
    c = Consumer("10.0.0.1:40001", conn=1, client_id="app")
    c.fetch(0.0, 0, 0, [req("orders", 0)], response_session_id=101)
    c.fetch(1.0, 101, 1, [], answered=False)
    c.fetch(2.0, 101, 0, [req("orders", 0)], response_session_id=202)
    c.fetch(3.0, 202, 1, [], response=[], response_session_id=202)
    result = simulate(build_plan(c.exchanges), SimConfig())
    assert (result.totals.sessions_created, result.totals.incremental, result.totals.responses) == (2, 1, 3)


def test_a_client_restarted_under_the_same_id_starts_afresh_and_is_not_linked():
    first = Consumer("10.0.0.1:40001", conn=1, client_id="app")
    first.fetch(0.0, 0, 0, [req("orders", 0)], response_session_id=101)
    first.fetch(1.0, 101, 1, [], response=[], response_session_id=101)
    again = Consumer("10.0.0.1:40555", conn=2, client_id="app")
    again.fetch(5.0, 0, 0, [req("orders", 0)], response_session_id=202)   # a new process: (0, 0)
    closed = Consumer("10.0.0.1:40777", conn=3, client_id="app")
    again.fetch(6.0, 202, -1, [], response=[])                             # consumer.close()
    closed.fetch(9.0, 0, 0, [req("orders", 0)], response_session_id=303)
    other_host = Consumer("10.0.0.9:40001", conn=4, client_id="app")
    other_host.fetch(10.0, 303, 0, [req("orders", 0)], response_session_id=404)
    plan = build_plan(first.exchanges + again.exchanges + closed.exchanges + other_host.exchanges)
    assert [s.follows for s in plan.streams] == [None, None, None, None]


def _evicted_then_throttled():
    """"small" (1 partition) has session 101; at t=2.5 "big" (2 partitions) comes; in the capture the broker had
    room, and throttled small's fetch at t=3 (an empty answer on its session)."""
    small = Consumer("10.0.0.1:40001", conn=1, client_id="small")
    small.fetch(0.0, 0, 0, [req("orders", 0)], response_session_id=101)
    for n in (1, 2):
        small.fetch(float(n), 101, n, [], response=[], response_session_id=101)
    small.fetch(3.0, 101, 3, [], response=[], response_session_id=101, throttle_ms=50)
    small.fetch(4.0, 101, 4, [], response=[], response_session_id=101)
    big = Consumer("10.0.0.2:40002", conn=2, client_id="big")
    big.fetch(2.5, 0, 0, [req("clicks", 0), req("clicks", 1)], response_session_id=202)
    big.fetch(3.5, 202, 1, [], response=[], response_session_id=202)
    return build_plan(small.exchanges + big.exchanges)


def test_a_throttled_fetch_on_an_evicted_session_is_answered_as_kafka_answers_it_without_a_70():
    # KafkaApis answers a throttled fetch with getThrottledResponse whatever its context: a session error context
    # gives (NONE, throttle, session 0, no partitions), so the client starts over with (0, 0) and sees no 70.
    plan = _evicted_then_throttled()
    result = simulate(plan, SimConfig(cache_slots=1, cache_shards=1, eviction_ms=1000))
    small = result.streams[0]
    assert small.evictions == 1 and dict(small.errors) == {}
    assert small.incremental == 2 and small.sessions_created == 1   # its (0, 0) at t=4 finds no room


def test_a_throttled_incremental_fetch_keeps_the_session_and_its_epoch_moves_on():
    plan = _evicted_then_throttled()
    result = simulate(plan, SimConfig(cache_slots=2, cache_shards=1))
    small = result.streams[0]
    # the throttled answer carries the session id: the next fetch (101, 4) is incremental, with no 71
    assert (small.incremental, dict(small.errors), small.sessions_created) == (4, {}, 1)


def test_a_throttled_full_fetch_creates_no_session_and_the_client_asks_again():
    c = Consumer("10.0.0.1:40001", conn=1, client_id="app")
    c.fetch(0.0, 0, 0, [req("orders", 0)], response=[], throttle_ms=100)
    c.fetch(1.0, 0, 0, [req("orders", 0)], response_session_id=101)
    c.fetch(2.0, 101, 1, [], response=[], response_session_id=101)
    result = simulate(build_plan(c.exchanges), SimConfig(cache_slots=1, cache_shards=1))
    assert (result.totals.sessions_created, result.totals.incremental, dict(result.totals.errors)) == (1, 1, {})


# Real Kafka 4.3.1 captures (the broker's own log beside each says what happened).

@pytest.fixture(scope="module")
def broker_restart():
    """Three Java consumers; the broker is SIGKILLed and restarted; each comes back on a new connection with
    (its old session id, 0). Kafka's log: 6 sessions created, no eviction, no session error."""
    return load_plan([CAPTURES / "java-broker-restart.pcap"])[0]


def test_java_consumers_coming_back_after_a_broker_restart_carry_their_sessions_over(broker_restart):
    follows = {s.index: s.follows for s in broker_restart.streams}
    assert sum(f is not None for f in follows.values()) == 3
    for s in broker_restart.streams:
        if s.follows is not None:
            before = broker_restart.streams[s.follows]
            assert (before.client_id, before.host) == (s.client_id, s.host)
            assert s.fetches[0].session_id == before.fetches[-1].session_id and s.fetches[0].epoch == 0


def test_simulating_the_broker_restart_with_kafkas_cache_gives_what_the_capture_shows(broker_restart):
    captured = captured_counts(broker_restart).totals
    sim = simulate(broker_restart, SimConfig(1000, 8)).totals
    assert (sim.sessions_created, sim.evictions, dict(sim.errors)) == (6, 0, {})
    # the three fetches in flight when the broker died got no answer, there as here
    assert (sim.requests, sim.responses, sim.incremental) == (captured.requests, captured.responses,
                                                              captured.incremental)


def test_a_tight_cache_what_if_on_the_broker_restart_invents_no_eviction(broker_restart):
    # Four slots, sessions stale after 10 s: the old sessions, unused for 20 s when their clients return, would be
    # evicted as stale if the clients came back with (0, 0). They come back with (id, 0) and close them.
    sim = simulate(broker_restart, SimConfig(4, 1, 10_000)).totals
    assert (sim.sessions_created, sim.evictions, dict(sim.errors)) == (6, 0, {})


def test_the_stale_eviction_capture_links_the_paused_consumer_to_its_return():
    # java-small-3 stops for 140 s; Kafka evicts its session as stale (its log: "Evicting stale FetchSession
    # 896563865"); it comes back on a new connection with (896563865, 0), is refused by the full cache, then
    # gets a session later on.
    plan = load_plan([CAPTURES / "java-stale-eviction.pcap"])[0]
    back = next(s for s in plan.streams if s.follows is not None)
    assert back.client_id == "java-small-3" and back.fetches[0].session_id == 896563865
    sim = simulate(plan, SimConfig(8, 8))
    assert sim.totals.evictions == 1 and dict(sim.totals.errors) == {}
    assert sim.streams[back.follows].evictions == 1 and sim.streams[back.index].sessions_created == 1


def test_a_close_sent_during_a_long_poll_frees_its_slot_only_once_the_poll_is_answered():
    # Kafka reads a connection's next request only after answering the one before. "leaving" closes its session
    # at t=10.5 while its fetch waits until t=11; "newcomer" asks for a session at t=10.7, answered at t=10.8:
    # the slot is still taken then, and the broker refused it, as the capture shows.
    leaving = Consumer("10.0.0.1:40001", conn=1, client_id="leaving")
    leaving.fetch(0.0, 0, 0, [req("orders", 0)], response_session_id=101)
    leaving.fetch(10.0, 101, 1, [], response=[], response_session_id=101, rtt=1.0)
    leaving.fetch(10.5, 101, -1, [], response=[], rtt=0.501)
    newcomer = Consumer("10.0.0.2:40002", conn=2, client_id="newcomer")
    newcomer.fetch(10.7, 0, 0, [req("orders", 1)], rtt=0.1)
    newcomer.fetch(12.0, 0, 0, [req("orders", 1)], response_session_id=202)
    newcomer.fetch(13.0, 202, 1, [], response=[], response_session_id=202)
    plan = build_plan(leaving.exchanges + newcomer.exchanges)
    result = simulate(plan, SimConfig(cache_slots=1, cache_shards=1))
    assert result.totals.to_json() == captured_counts(plan).totals.to_json()
    assert (result.streams[1].sessions_created, result.streams[1].incremental) == (1, 1)


def test_simulating_java_evictions_with_its_own_cache_gives_what_kafka_did():
    # Kafka 4.3.1, 8 slots in 8 shards: its log has 12 sessions created and 4 size-evictions (of java-small-0,
    # -3, -4 and -5 by the four wide consumers), each victim's next fetch a 70. The small consumers close while
    # a fetch is in flight: their closes are read after it, and a (0, -1) close creates no session.
    plan = load_plan([CAPTURES / "java-evictions.pcap"])[0]
    result = simulate(plan, SimConfig(8, 8))
    assert result.totals.to_json() == captured_counts(plan).totals.to_json()
    assert (result.totals.sessions_created, result.totals.evictions, dict(result.totals.errors)) == (12, 4, {70: 4})
    victims = {s.client_id for s in plan.streams if result.streams[s.index].evictions}
    assert victims == {"java-small-0", "java-small-3", "java-small-4", "java-small-5"}
    assert {s.client_id for s in plan.streams if result.evicted_by[s.index]} == {
        "java-wide2", "java-wide3", "java-wide4", "java-wide5"}
