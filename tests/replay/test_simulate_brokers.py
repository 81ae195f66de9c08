"""simulate with several brokers: each broker's cache is on its own, so brokers can run in separate processes."""

from __future__ import annotations

from fetchtool.replay.plan import build_plan
from fetchtool.replay.simulate import SimConfig, simulate, simulate_many

from .scenario import Consumer

BROKERS = ("10.0.0.1:9092", "10.0.0.2:9092", "10.0.0.3:9092")
TIGHT = SimConfig(cache_slots=2, cache_shards=1, eviction_ms=100)


def _three_brokers_with_thrashing_caches():
    return build_plan(_exchanges())


def _exchanges():
    """On each of three brokers, three session consumers of different sizes start 30 ms apart; with two slots
    and eviction_ms=100 the bigger ones evict the smaller ones there, and the victims get 70."""
    exchanges = []
    for b, broker in enumerate(BROKERS):
        for c in range(3):
            n = 10 * b + c
            consumer = Consumer(f"10.0.1.{n}:{40000 + n}", broker=broker, conn=n, client_id=f"c{n}", max_wait_ms=0)
            exchanges += consumer.session_workload(1000 + n, f"topic-{b}", 3 + 2 * c, 0.03 * c, 0.05, 12)
    return exchanges


def _as_json(result):
    return (result.totals.to_json(), {b: t.to_json() for b, t in result.brokers.items()},
            [t.to_json() for t in result.streams], dict(result.evicted_by))


def test_brokers_in_two_processes_give_the_same_result_as_in_one():
    plan = _three_brokers_with_thrashing_caches()
    alone = simulate(plan, TIGHT)
    assert alone.totals.evictions > 0 and alone.totals.errors.get(70, 0) > 0   # the caches do thrash
    assert list(alone.brokers) == list(BROKERS)
    split = simulate(plan, TIGHT, processes=2)
    assert _as_json(split) == _as_json(alone)


def test_several_configs_split_by_broker_come_back_in_config_order():
    plan = _three_brokers_with_thrashing_caches()
    configs = [TIGHT, SimConfig(cache_slots=1000, cache_shards=1, eviction_ms=100)]
    results = simulate_many(plan, configs, processes=2)
    assert [r.config for r in results] == configs
    assert [_as_json(r) for r in results] == [_as_json(simulate(plan, c)) for c in configs]
    assert results[1].totals.evictions == 0


def test_a_broker_simulated_without_the_others_behaves_the_same():
    plan = _three_brokers_with_thrashing_caches()
    everything = simulate(plan, TIGHT)
    only_second = build_plan([e for e in _exchanges() if e.broker == BROKERS[1]])
    alone = simulate(only_second, TIGHT)
    assert alone.totals.to_json() == everything.brokers[BROKERS[1]].to_json()

