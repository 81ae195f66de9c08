"""simulate and replay on the scenario captures (captures/scenarios, made by `fetchtool synth`).

The ground truth is each scenario's .expected.json: what the generating script made happen (which sessions its
cache evicted, which request it duplicated), not what our analysis says.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from fetchtool.replay.driver import ReplayOptions, replay
from fetchtool.replay.loading import load_plan
from fetchtool.replay.simulate import SimConfig, simulate
from fetchtool.replay.tally import captured_counts

SCENARIOS = Path(__file__).resolve().parents[2] / "captures" / "scenarios"
THRASH = SCENARIOS / "eviction-thrash.pcap"
THRASH_CACHE = SimConfig(cache_slots=3, cache_shards=1, eviction_ms=120_000)  # as the scenario README says


def _expected(name: str) -> list[dict]:
    return json.loads((SCENARIOS / f"{name}.expected.json").read_text())["findings"]


def _count(findings, code, cause=None) -> int:
    return sum(1 for f in findings if f["code"] == code and (cause is None or f["cause"] == cause))


def test_simulating_the_captured_cache_predicts_the_eviction_thrash_ground_truth():
    plan, _ = load_plan([THRASH])
    truth = _expected("eviction-thrash")
    result = simulate(plan, THRASH_CACHE)
    evicted_70s = _count(truth, "FETCH_SESSION_ID_NOT_FOUND", "evicted")
    assert evicted_70s == 2
    assert dict(result.totals.errors) == {70: evicted_70s}
    assert result.totals.evictions == evicted_70s
    # the same victims as the capture's broker chose, client by client
    captured = captured_counts(plan)
    victims = {f["client"] for f in truth if f["code"] == "FETCH_SESSION_ID_NOT_FOUND"}
    assert {s.client for s in plan.streams if result.streams[s.index].errors.get(70)} == victims
    assert result.totals.to_json() == captured.totals.to_json()


def test_more_slots_stop_the_thrash_and_the_table_shows_which_setting_fixes_it():
    plan, _ = load_plan([THRASH])
    seventies = {slots: simulate(plan, SimConfig(slots, 1, 120_000)).totals.errors.get(70, 0)
                 for slots in (3, 4, 5, 2000)}
    assert seventies[3] == 2 and seventies[4] < 2 and seventies[5] == 0 and seventies[2000] == 0


@pytest.mark.parametrize("name", ["healthy", "sarama-churn", "sessionless-many", "concurrent-fetch"])
def test_simulating_a_scenario_with_its_own_cache_reproduces_its_session_errors(name):
    plan, _ = load_plan([SCENARIOS / f"{name}.pcap"])
    truth = _expected(name)
    result = simulate(plan, SimConfig())
    expected = {}
    for code, err in (("FETCH_SESSION_ID_NOT_FOUND", 70), ("INVALID_FETCH_SESSION_EPOCH", 71)):
        if _count(truth, code):
            expected[err] = _count(truth, code)
    assert dict(result.totals.errors) == expected
    if not expected:
        assert result.totals.sessions_created == captured_counts(plan).totals.sessions_created
    # after an error, a simulated session client reacts as FetchSessionHandler does ((id, 0): a new session),
    # which may differ from the scripted client in the capture; the errors themselves must match


# Paced, the broker evicts by its own clock (capture time x speed): the victims were created 130 s before the
# newcomers, 10 s past Kafka's 120 s protection. At speed 100 that margin is 100 ms of real time, so a replay that
# starts late on a busy machine still sees the capture's evictions (at 500 it was 20 ms, and failed under load).
@pytest.mark.parametrize("mode", [{"as_fast": True}, {"speed": 100.0}], ids=["as-fast", "speed-100"])
def test_replaying_the_thrash_against_the_embedded_broker_reproduces_the_70s_and_more_slots_remove_them(mode):
    plan, _ = load_plan([THRASH])
    tight = asyncio.run(replay(plan, ReplayOptions(config=THRASH_CACHE, **mode)))
    errors = sum((r.tally.errors for r in tight.streams), start=__import__("collections").Counter())
    assert dict(errors) == {70: 2}
    assert tight.broker_metrics["IncrementalFetchSessionEvictionsPerSec"] == 2
    roomy = asyncio.run(replay(plan, ReplayOptions(config=SimConfig(2000, 1, 120_000), **mode)))
    assert all(not r.tally.errors for r in roomy.streams)
    assert sum(r.tally.sessions_created for r in roomy.streams) == 5
    # the 130 s capture took well under a second
    assert roomy.elapsed_s < 5
