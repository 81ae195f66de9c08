"""simulate makes each step's reads while it simulates, from the plan's spill, instead of holding every step's reads
in the plan: `fetchtool simulate` of a 1.1 GB capture peaked at 325 MB, growing about 260 MB per GB (issue 19).

The reads must be the very reads the plan would have held, with the same sharing of result objects between steps
(the engine's fast paths rely on it), so every simulation gives the same result either way.
"""

from __future__ import annotations

import json
import tempfile
import tracemalloc
from pathlib import Path

import pytest

from fetchtool.decoder import decode_capture
from fetchtool.replay.plan import LATER, build_plan
from fetchtool.replay.simulate import SimConfig, simulate_many

from .scenario import Consumer, req, resp

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
CONFIGS = [SimConfig(2, 1, 120_000), SimConfig(5, 2, 1_000), SimConfig(1000, 8, 120_000)]


def _outcome(results) -> list:
    return [([t.to_json() for t in r.streams], sorted(r.evicted_by.items())) for r in results]


@pytest.mark.parametrize("name", ["kafka/java-evictions.pcap", "kafka/cluster-followers.pcap",
                                  "kafka/platformatic-churn.pcap", "kafka/java-broker-restart.pcap",
                                  "scenarios/eviction-thrash.pcap", "scenarios/concurrent-fetch.pcap",
                                  "scenarios/partition-errors.pcap", "scenarios/topic-id-switch.pcap"])
def test_a_simulation_with_reads_made_as_it_goes_gives_the_result_of_the_plan_holding_them(name):
    exchanges = list(decode_capture([str(CAPTURES / name)]))
    held = build_plan(exchanges)
    with tempfile.TemporaryFile() as spill:
        later = build_plan(iter(exchanges), spill, LATER)
        assert later.later_reads is not None and not any(f.reads for s in later.streams for f in s.fetches)
        for processes in (1, 2):   # 2: each broker in a forked worker, reading the one spill file
            assert _outcome(simulate_many(later, CONFIGS, processes=processes)) == \
                _outcome(simulate_many(held, CONFIGS, processes=processes))


def test_reads_asked_for_in_any_order_are_the_reads_the_plan_holds():
    exchanges = list(decode_capture([str(CAPTURES / "kafka" / "cluster-followers.pcap")]))
    held = build_plan(exchanges)
    later = build_plan(exchanges, with_reads=LATER)
    steps = [(i, j) for i, s in enumerate(held.streams) for j in range(len(s.fetches))]
    assert later.later_reads is not None
    take = later.later_reads.reader(later.streams)
    for i, j in reversed(steps):   # the last step first: every other step waits in the reader's buffer
        reads, kept = take(i, j), held.streams[i].fetches[j].reads
        assert list(reads.items()) == list(kept.items())
        assert reads.changed[::2] == kept.changed[::2]
    assert sum(len(held.streams[i].fetches[j].reads) for i, j in steps) > 1000


def _consumers(fetches: int, partitions: int) -> list:
    # Every response carries every partition with a new high watermark: a new result per partition and step, what
    # makes a plan holding its reads grow with the capture. (The wanted set stays the same: one per stream.)
    clients = [Consumer(f"10.0.0.{n}:5000{n}", conn=n) for n in range(4)]
    for k in range(fetches):
        for n, c in enumerate(clients):
            sid = 100 + n
            c.fetch(k * 0.5, 0 if k == 0 else sid, k, [req("t", p) for p in range(partitions)],
                    response=[resp("t", p, hw=1000 * (k + 1), records=10) for p in range(partitions)],
                    response_session_id=sid)
    return [x for c in clients for x in c.exchanges]


def _held_and_peak(run) -> tuple[int, int, object]:
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        out = run()
        now, peak = tracemalloc.get_traced_memory()
        return now - before, peak - before, out
    finally:
        tracemalloc.stop()


def test_simulate_memory_does_not_grow_with_the_steps_reads():
    exchanges = _consumers(100, 300)
    with tempfile.TemporaryFile() as spill:
        held_size, _, held = _held_and_peak(lambda: build_plan(iter(exchanges), spill))
        later_size, _, later = _held_and_peak(lambda: build_plan(iter(exchanges), spill, LATER))
        expected = _outcome(simulate_many(held, [CONFIGS[-1]], processes=1))   # (and the imports it makes)
        _, simulating, results = _held_and_peak(lambda: simulate_many(later, [CONFIGS[-1]], processes=1))
        assert _outcome(results) == expected
    assert results[0].totals.incremental == 396
    # measured: the plan holding its reads 20.8 MB, the one making them later 0.6 MB, and simulating it peaks
    # 1.0 MB above it (the four sessions' partitions, a step's reads per stream)
    assert later_size < held_size / 5
    assert simulating < held_size / 5


@pytest.mark.parametrize("name", ["kafka/java-evictions.pcap", "kafka/cluster-followers.pcap",
                                  "kafka/java-broker-restart.pcap", "scenarios/topic-id-switch.pcap"])
def test_each_steps_changed_partitions_are_what_comparing_with_the_steps_before_finds(name):
    # The plan works out a step's changed partitions while it makes the reads; ReadResults.settle, comparing the
    # finished mapping with the reads before it, is the reference.
    plan = build_plan(list(decode_capture([str(CAPTURES / name)])))
    steps = [f.reads for s in plan.streams for f in s.fetches]
    for reads in steps:
        assert reads.changed == type(reads).derive(reads.since, reads).changed
    assert sum(len(r.changed) for r in steps) > 0


def test_simulate_of_a_capture_too_big_to_hold_its_reads_reports_what_holding_them_reports(monkeypatch):
    # `fetchtool simulate` holds the reads of a capture with few partition entries (made once for all the
    # configurations) and makes them as it goes beyond HELD_READS_LIMIT; 8 configurations run in forked workers,
    # each reading the spill the command keeps open.
    from typer.testing import CliRunner

    import fetchtool.replay.plan as plan_module
    from fetchtool.cli import app

    args = ["simulate", str(CAPTURES / "kafka" / "java-evictions.pcap"), "--cache-slots", "2,4,8,12,16,64,1000,2000",
            "--cache-shards", "1", "--format", "json"]
    plans = []
    build = plan_module.build_plan

    def build_plan_seen(*a, **k):
        plans.append(build(*a, **k))
        return plans[-1]

    monkeypatch.setattr(plan_module, "build_plan", build_plan_seen)
    held = CliRunner().invoke(app, args)
    monkeypatch.setattr(plan_module, "HELD_READS_LIMIT", 0)
    later = CliRunner().invoke(app, args)
    assert held.exit_code == later.exit_code == 0, later.output
    assert [p.later_reads is None for p in plans] == [True, False]
    assert later.stdout == held.stdout
    evictions = [c["totals"]["evictions"] for c in json.loads(held.stdout)["configs"]]
    assert evictions[0] > 0 == evictions[-1]


def test_a_plan_holds_its_reads_until_they_are_too_many_then_makes_them_all_while_simulating(monkeypatch):
    import fetchtool.replay.plan as plan_module

    exchanges = list(decode_capture([str(CAPTURES / "kafka" / "java-evictions.pcap")]))
    held = build_plan(exchanges)
    entries = sum(len(f.wanted) + plan_module.STEP_ENTRIES for s in held.streams for f in s.fetches)
    expected = _outcome(simulate_many(held, CONFIGS, processes=1))
    for limit, made_later in ((entries, False), (entries // 2, True), (0, True)):
        monkeypatch.setattr(plan_module, "HELD_READS_LIMIT", limit)
        plan = build_plan(exchanges, with_reads=plan_module.LATER_IF_MANY)
        assert (plan.later_reads is not None) == made_later
        assert any(f.reads for s in plan.streams for f in s.fetches) != made_later
        assert _outcome(simulate_many(plan, CONFIGS, processes=1)) == expected
