"""simulate: the capture's workload through the broker-side engine with other cache settings."""

from __future__ import annotations

from fetchtool.replay.plan import build_plan
from fetchtool.replay.simulate import SimConfig, simulate
from fetchtool.replay.tally import captured_counts

from .scenario import Consumer, req


def _small_consumers_then_a_big_one():
    """Two 5-partition session consumers fetch every 50 ms from t=0; at t=0.3 s a 20-partition consumer starts.

    With eviction_ms=100 and two slots the big one evicts the smaller sessions once they are older than 100 ms
    (Kafka's "more partitions and not recently created" rule); each victim's next incremental fetch gets 70 and
    its (id, 0) retry cannot get a slot back. MaxWaitMs 0: the broker answers at once, as the capture shows.
    """
    small_a = Consumer("10.0.0.1:40001", conn=1, client_id="small-a", max_wait_ms=0)
    small_a.session_workload(101, "orders", 5, 0.000, 0.05, 20)
    small_b = Consumer("10.0.0.2:40002", conn=2, client_id="small-b", max_wait_ms=0)
    small_b.session_workload(202, "orders", 5, 0.010, 0.05, 20)
    big = Consumer("10.0.0.3:40003", conn=3, client_id="big", max_wait_ms=0)
    big.session_workload(303, "clicks", 20, 0.300, 0.05, 10)
    return build_plan(small_a.exchanges + small_b.exchanges + big.exchanges)


def _index(plan, client_id):
    return next(s.index for s in plan.streams if s.client_id == client_id)


def _by_client(plan, result):
    return {s.client_id: result.streams[s.index] for s in plan.streams}


def test_a_bigger_session_evicts_an_older_smaller_one_and_the_victim_gets_70():
    plan = _small_consumers_then_a_big_one()
    tight = simulate(plan, SimConfig(cache_slots=2, cache_shards=1, eviction_ms=100))
    clients = _by_client(plan, tight)
    assert clients["big"].sessions_created == 1 and clients["big"].errors == {}
    victims = [c for c in ("small-a", "small-b") if clients[c].errors.get(70)]
    assert len(victims) == 1
    assert clients[victims[0]].evictions == 1
    assert tight.totals.errors == {70: 1}
    # the victim falls back to full (0,0) fetches the broker cannot keep: fewer incremental answers...
    survivor = ({"small-a", "small-b"} - set(victims)).pop()
    assert clients[victims[0]].incremental < clients[survivor].incremental
    # ...until the big consumer stops (t=0.75 s): 100 ms later its session is stale and the victim takes the slot
    assert clients["big"].evictions == 1 and clients[victims[0]].sessions_created == 2
    assert tight.totals.evictions == 2 and tight.evicted_by[_index(plan, victims[0])] == 1


def test_one_more_slot_removes_the_errors():
    plan = _small_consumers_then_a_big_one()
    roomy = simulate(plan, SimConfig(cache_slots=3, cache_shards=1, eviction_ms=100))
    assert roomy.totals.errors == {}
    assert roomy.totals.evictions == 0
    assert roomy.totals.sessions_created == 3
    # every fetch after the first of each client is incremental: 3 full out of 50
    assert roomy.totals.incremental == roomy.totals.requests - 3 == 47


def test_sharding_divides_the_slots_so_a_free_slot_elsewhere_does_not_help():
    plan = _small_consumers_then_a_big_one()
    # 3 slots in 3 shards: one per shard, round robin puts the big session on the third shard: no eviction
    sharded = simulate(plan, SimConfig(cache_slots=3, cache_shards=3, eviction_ms=100))
    assert sharded.totals.errors == {}
    # 2 slots in 2 shards: the big session's full fetch lands on a shard that already holds a small session
    halves = simulate(plan, SimConfig(cache_slots=2, cache_shards=2, eviction_ms=100))
    assert halves.totals.errors.get(70) == 1


def test_sessions_off_makes_every_fetch_full_and_sessions_on_upgrades_sessionless_clients():
    rd = Consumer("10.0.0.5:1", conn=1, client_id="rdkafka")
    for n in range(10):
        rd.fetch(n * 0.1, 0, -1, [req("t", p) for p in range(4)])
    plan = build_plan(rd.exchanges)
    as_captured = simulate(plan, SimConfig())
    assert as_captured.totals.incremental == 0 and as_captured.totals.sessions_created == 0
    on = simulate(plan, SimConfig(), sessions="on")
    assert on.totals.sessions_created == 1 and on.totals.incremental == 9
    # incremental fetches that carry no partitions are smaller than the captured full ones
    assert on.totals.request_bytes < as_captured.totals.request_bytes
    assert on.totals.response_bytes < as_captured.totals.response_bytes


def test_the_captured_side_counts_what_the_capture_shows():
    a = Consumer("10.0.0.1:40001", conn=1)
    a.fetch(0.0, 0, 0, [req("t", 0)], response_session_id=9)
    a.fetch(0.5, 9, 1, [], response=[], response_session_id=9)
    a.fetch(1.0, 9, 2, [], error=70)
    a.fetch(1.1, 0, 0, [req("t", 0)], response_session_id=0)
    captured = captured_counts(build_plan(a.exchanges))
    t = captured.totals
    assert (t.requests, t.sessions_created, t.evictions, t.incremental, dict(t.errors)) == (4, 1, 1, 1, {70: 1})
