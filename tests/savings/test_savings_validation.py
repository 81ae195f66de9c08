"""Item 5: the estimate against a real broker. The same workload runs twice against `fetchtool broker`: once
sessionless (epoch -1, written as a capture), once with a fetch session (FetchSessionHandler), measuring the
bytes on the socket. The incremental bytes estimated from the first capture must be within 2% of the second
run's (they are in fact equal)."""

from __future__ import annotations

from broker_workload import run, schedule

from fetchtool.analysis.savings.estimator import estimate
from fetchtool.decoder import decode_capture


def test_estimate_matches_a_session_run_against_fetchtool_broker(tmp_path):
    partitions = 120
    plan = schedule(rounds=15, partitions=partitions, changes_per_round=4)
    pcap = tmp_path / "sessionless.pcap"
    plain = run("orders", partitions, plan, sessions=False, pcap_path=pcap)
    with_sessions = run("orders", partitions, plan, sessions=True)
    assert plain["positions"] == with_sessions["positions"]   # the same records were fetched

    total = estimate(decode_capture([pcap])).to_json()["total"]
    assert total["exchanges"] == 15
    assert total["actual_request_bytes"] == plain["request_bytes"]
    assert total["actual_response_bytes"] == plain["response_bytes"]
    estimated = total["incremental_request_bytes"] + total["incremental_response_bytes"]
    measured = with_sessions["request_bytes"] + with_sessions["response_bytes"]
    assert abs(estimated - measured) <= 0.02 * measured
    assert total["incremental_request_bytes"] == with_sessions["request_bytes"]
    assert total["incremental_response_bytes"] == with_sessions["response_bytes"]
    assert measured < 0.5 * (plain["request_bytes"] + plain["response_bytes"])
