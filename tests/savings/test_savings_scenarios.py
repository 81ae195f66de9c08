"""Captures whose incremental bytes are known by construction.

Twins: on one broker, a Java-like consumer with a working session and a sessionless consumer (epoch -1) fetch the
same partitions at the same offsets and get the same data. What the sessionless twin would send with a session is
exactly what its session-using twin did send, byte for byte (same Fetch version, same client id length); and the
full-fetch equivalent of the session twin is exactly what the sessionless one sent.
"""

from __future__ import annotations

from fetchtool.analysis.savings.estimator import estimate
from fetchtool.decoder import decode_capture
from same_data_consumers import write_capture


def _twins(path, version=12, rounds=10):
    write_capture(path, "twin-a", "twin-b", version=version, rounds=rounds)


def _by_client(result):
    return {c["client_id"]: c for c in result.to_json()["per_client"]}


def test_sessionless_twin_would_send_exactly_what_its_session_twin_sent(tmp_path):
    for version in (12, 13):
        path = tmp_path / f"twins-v{version}.pcap"
        _twins(path, version)
        c = _by_client(estimate(decode_capture([path])))
        a, b = c["twin-a"], c["twin-b"]
        assert b["requests"] == {"sessionless": 10} and a["requests"] == {"full": 1, "incremental": 9}
        # the sessionless client with a session = the session client
        assert b["incremental_request_bytes"] == a["actual_request_bytes"]
        assert b["incremental_response_bytes"] == a["actual_response_bytes"]
        # the session client without a session = the sessionless client
        assert a["full_request_bytes"] == b["actual_request_bytes"]
        assert a["full_response_bytes"] == b["actual_response_bytes"]
        # a working session is already incremental: nothing left to save, the difference is realised
        assert a["saved_bytes"] == 0 and a["lost_bytes"] == 0
        assert a["realised_bytes"] == b["actual_bytes"] - a["actual_bytes"] > 0
        assert b["potential_bytes"] == b["saved_bytes"] == b["actual_bytes"] - a["actual_bytes"]
        assert a["records_bytes"] == b["records_bytes"] > 0
        assert a["reencode_mismatches"] == b["reencode_mismatches"] == 0


def test_projection_grows_full_fetches_only(tmp_path):
    path = tmp_path / "twins.pcap"
    _twins(path)
    b = _by_client(estimate(decode_capture([path])))["twin-b"]
    p10, p100 = b["projection"]["10x"], b["projection"]["100x"]
    # with a session, only the first fetch (the one that creates it) is full: the incremental equivalent grows by
    # that one; the sessionless client's 10 full fetches each grow by about as much (the first carries the most
    # records, so its record sizes' length prefixes are the longest)
    inc10 = p10["incremental_bytes"] - b["incremental_bytes"]
    assert inc10 > 0 and p100["incremental_bytes"] - b["incremental_bytes"] == 11 * inc10
    assert 9 * inc10 < p10["actual_bytes"] - b["actual_bytes"] <= 10 * inc10
    # full-shaped bytes minus records grow linearly with the partition count
    meta = b["actual_bytes"] - b["records_bytes"]
    assert p10["actual_bytes"] > b["records_bytes"] + 9 * meta
    assert p100["actual_bytes"] - p10["actual_bytes"] == 10 * (p10["actual_bytes"] - b["actual_bytes"])


def test_healthy_sessions_are_realised_savings_only():
    r = estimate(decode_capture(["captures/scenarios/healthy.pcap"])).to_json()["total"]
    assert r["incremental_bytes"] == r["actual_bytes"] and r["saved_bytes"] == 0
    assert r["realised_bytes"] == r["full_bytes"] - r["actual_bytes"] > 0


def test_failing_sessions_are_booked_as_lost_by_cause():
    churn = estimate(decode_capture(["captures/scenarios/sarama-churn.pcap"])).to_json()["total"]
    assert churn["requests"] == {"full": 8}
    assert churn["lost_by_cause"]["churn"] == churn["lost_bytes"] == churn["saved_bytes"] > 0
    restart = estimate(decode_capture(["captures/scenarios/broker-restart.pcap"])).to_json()["total"]
    assert restart["lost_by_cause"]["70"] > 0
    thrash = estimate(decode_capture(["captures/scenarios/eviction-thrash.pcap"])).to_json()
    assert thrash["total"]["lost_by_cause"].get("70", 0) > 0


def test_real_clients_against_tansu_resize_exactly_except_tagged_fields():
    """kafka-python and aiokafka frames re-size exactly; tansu's v16 responses carry an (empty) NodeEndpoints
    tagged field that the decoded rows drop: 3 bytes per response, carried over into both equivalents."""
    for name in ("kafka-python-tansu.pcap", "aiokafka-tansu.pcap", "kafka-python-limits-tansu.pcapng"):
        t = estimate(decode_capture([f"captures/{name}"])).to_json()["total"]
        assert t["reencode_mismatches"] == 0, name
        assert t["full_bytes"] == t["actual_bytes"], name   # every fetch there is already full
    rd = estimate(decode_capture(["captures/confluent-kafka-tansu.pcap"])).to_json()["total"]
    assert rd["reencode_mismatches"] == 6 and rd["full_bytes"] == rd["actual_bytes"]
    assert rd["requests"] == {"sessionless": 7} and rd["potential_bytes"] > 0
