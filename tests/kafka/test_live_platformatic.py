"""@platformatic/kafka against Apache Kafka 4.3.1, live: the churning 2.2.x client and the fixed 2.12+ one.

@platformatic/kafka 2.2.x asks for a new fetch session on every Fetch and never uses one (its issue #315, fixed in
2.12). What each client did is read from Kafka's own record (its request log and session-cache log), and
fetchtool's reconstruction of the same traffic, from a capture taken on loopback at the same time, is held to it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

import broker_record as br
import kafka_peer

pytestmark = [pytest.mark.kafka, pytest.mark.node, pytest.mark.slow]

KAFKA = {"nodes": 1, "cache_slots": 1000}
CONSUMER_JS = Path(__file__).resolve().parents[2] / "examples" / "platformatic_consumer.mjs"
RUN_S = "8"


@pytest.fixture(scope="module")
def run(kafka, node_clients, tmp_path_factory):
    """Both platformatic versions consume one topic side by side for a few seconds while tcpdump records."""
    kafka.create_topic("churn", 3)
    kafka_peer.run_java_tool(["org.apache.kafka.tools.ProducerPerformance", "--topic", "churn", "--num-records",
                              "60", "--record-size", "50", "--throughput", "-1", "--command-property",
                              f"bootstrap.servers={kafka.bootstrap}"])
    capture = tmp_path_factory.mktemp("platformatic") / "platformatic.pcap"
    node = kafka.nodes[0]
    with kafka_peer.LoopbackCapture(capture, [node.port]):
        clients = [
            subprocess.Popen([node_clients.node, str(CONSUMER_JS), pkg, kafka.bootstrap, "churn", f"group-{name}",
                              name, RUN_S, "300"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            for name, pkg in (("platformatic-old", node_clients.platformatic_old),
                              ("platformatic-new", node_clients.platformatic_new))
        ]
        for c in clients:
            _, err = c.communicate(timeout=120)
            assert c.returncode == 0, err[-1000:]
    record = br.load({"node1": node.sessions_log}, {"node1": node.requests_log})
    analysis = json.loads(fetchtool("analyze", capture))
    # A client that closes its connection during a long poll never receives that response, yet Kafka creates the
    # session when it builds it and logs it as completed: only responses on the wire can be held to the capture.
    delivered = {(row["client"], row["correlation_id"]) for row in map(json.loads, fetchtool("decode", capture)
                                                                        .splitlines()) if row["response_frame"]}
    return record, analysis, delivered


def fetchtool(command: str, capture: Path) -> str:
    return subprocess.run([sys.executable, "-m", "fetchtool", command, str(capture), "--format",
                           "json" if command == "analyze" else "jsonl"],
                          capture_output=True, text=True, check=True, timeout=300).stdout


def logged_fetches(record: br.BrokerRecord, client_id: str) -> list[br.FetchRecord]:
    return [f for f in record.fetches if f.client_id == client_id]


def test_platformatic_2_2_asks_kafka_for_a_new_session_on_every_fetch(run):
    record, _, _ = run
    old = logged_fetches(record, "platformatic-old")
    assert len(old) >= 5
    # Kafka's record of issue #315: every Fetch is (0, 0), and every answer grants a session that is never used.
    assert {(f.session_id, f.session_epoch) for f in old} == {(0, 0)}
    granted = {f.response_session_id for f in old if f.response_session_id}
    used = {c.session_id for c in record.all_incremental}
    assert len(granted) == len(old) and not granted & used


def test_platformatic_2_12_goes_incremental_on_kafka(run):
    record, _, _ = run
    new = logged_fetches(record, "platformatic-new")
    granted = {f.response_session_id for f in new if f.response_session_id}
    incremental = [c for c in record.all_incremental if c.session_id in granted]
    assert granted and len(incremental) >= len(new) - 2 * len(granted)


def test_fetchtool_counts_the_sessions_kafka_granted_each_client(run):
    record, analysis, delivered = run
    by_client: dict[str, set[int]] = defaultdict(set)
    for s in analysis["sessions"]:
        by_client[s["client_id"]].add(s["session_id"])
    for client_id in ("platformatic-old", "platformatic-new"):
        granted = {f.response_session_id for f in logged_fetches(record, client_id)
                   if f.response_session_id and f.key in delivered}
        assert by_client[client_id] == granted, client_id
    # Kafka logs an incremental context when the request arrives; only those whose answer reached the wire count.
    answered = {(f.session_id, f.session_epoch) for f in record.fetches if f.key in delivered}
    incremental_by_session = {s["session_id"]: s["incremental_requests"] for s in analysis["sessions"]}
    for session_id, contexts in record.sessions["node1"].incremental_by_id().items():
        logged = [c for c in contexts if (session_id, c.request_epoch) in answered]
        assert incremental_by_session.get(session_id) == len(logged), session_id
