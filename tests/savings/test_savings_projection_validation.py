"""The 10x projection against a real broker: the same change plan (the same number of partitions changing per
fetch, with the same records) run against `fetchtool broker` with 10x the partitions, sessionless and with a
session. What the 1x sessionless capture projects at 10x must be within 2% of what the 10x runs really send and
receive, both without sessions (actual) and with them (incremental)."""

from __future__ import annotations

from broker_workload import run, schedule

from fetchtool.analysis.savings.estimator import estimate
from fetchtool.decoder import decode_capture


def test_projection_at_10x_matches_runs_with_10x_the_partitions(tmp_path):
    partitions, rounds, changes = 20, 8, 3
    pcap = tmp_path / "sessionless-1x.pcap"
    run("orders", partitions, schedule(rounds, partitions, changes), sessions=False, pcap_path=pcap,
        history=False)
    projected = estimate(decode_capture([pcap])).to_json()["total"]["projection"]["10x"]

    plan = schedule(rounds, 10 * partitions, changes)
    plain = run("orders", 10 * partitions, plan, sessions=False, history=False)
    with_sessions = run("orders", 10 * partitions, plan, sessions=True, history=False)
    actual = plain["request_bytes"] + plain["response_bytes"]
    incremental = with_sessions["request_bytes"] + with_sessions["response_bytes"]
    assert abs(projected["actual_bytes"] - actual) <= 0.02 * actual
    assert abs(projected["incremental_bytes"] - incremental) <= 0.02 * incremental
    assert abs(projected["saved_bytes"] - (actual - incremental)) <= 0.02 * (actual - incremental)
