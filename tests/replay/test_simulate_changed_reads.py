"""simulate answers incremental fetches from reads that say what changed: the same result as walking them all.

The plan's reads of each fetch are a sessions.ReadResults derived from the stream's previous reads, so the engine
visits only the partitions whose result changed. On a capture of follower fetches (Fetch v13+, where a partition
can appear under its topic's name in one request and under its id in another, so two wanted partitions share one
broker key), the fast path must give the very same simulation as the walk over every partition. A first version
listed such a key twice in ``changed`` and answered it twice: response bytes grew by 3,811 on this capture.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fetchtool.replay.loading import load_plan
from fetchtool.replay.simulate import SimConfig, simulate
from fetchtool.sessions import manager as manager_module
from fetchtool.sessions.partitions import ReadResults

CAPTURES = Path(__file__).resolve().parents[2] / "captures" / "kafka"


@pytest.fixture(scope="module")
def followers_plan():
    plan, _ = load_plan([CAPTURES / "cluster-followers.pcap"])
    return plan


def test_each_fetch_reads_list_exactly_the_partitions_whose_result_changed(followers_plan):
    for stream in followers_plan.streams:
        for fetch in stream.fetches:
            reads = fetch.reads
            assert reads.changed == ReadResults.derive(reads.since, reads).changed


@pytest.mark.parametrize("config", [SimConfig(1000, 8), SimConfig(2, 1)], ids=str)
def test_simulate_visiting_only_changed_partitions_equals_walking_every_one(followers_plan, config, monkeypatch):
    fast = simulate(followers_plan, config)
    monkeypatch.setattr(manager_module, "_changed_items", lambda session, results: results.items())
    walked = simulate(followers_plan, config)
    assert fast.totals.incremental > 0
    assert [t.to_json() for t in fast.streams] == [t.to_json() for t in walked.streams]
    assert fast.totals.to_json() == walked.totals.to_json()
