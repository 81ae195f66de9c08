"""fetchtool replay against a three-node Apache Kafka 4.3.1 cluster: replay sends every fetch to the one broker
given with --broker, so the topics it creates have all their partitions on that broker's node; a topic that
already exists with partitions led by other nodes is named, not waited for."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import broker_record as br
import pytest

pytestmark = pytest.mark.kafka

KAFKA = {"nodes": 3, "cache_slots": 1000}

CAPTURE = Path(__file__).resolve().parents[2] / "captures" / "kafka" / "java-rebalance.pcap"


def _replay(node) -> dict:
    done = subprocess.run([sys.executable, "-m", "fetchtool", "replay", str(CAPTURE), "--broker", node.bootstrap,
                           "--create-topics", "--as-fast-as-possible", "--format", "json", "--timeout", "10"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_created_topic_lives_on_the_target_node_and_a_second_node_is_told_it_leads_nothing(kafka):
    first, second = kafka.nodes[0], kafka.nodes[1]
    report = _replay(first)
    assert report["totals"]["partition_errors"] == {} and report["totals"]["errors"] == {}
    assert report["totals"]["incremental_share"] > 0
    # Kafka's own word: the sessions were created on the node the replay was sent to, and every fetch there
    # was answered without a partition error
    created = br.read_sessions_log(first.sessions_log).created
    assert len(created) == report["totals"]["sessions_created"] > 0
    fetches = [f for f in br.read_requests_log(first.requests_log) if f.client_id.startswith("java-")]
    assert fetches and not any(f.partition_errors for f in fetches)

    # The topic now exists, led by the first node: sent to the second node, the replay says so up front and
    # does not wait for leaders that will never come.
    elsewhere = _replay(second)
    assert any("are led by other brokers" in n for n in elsewhere["notes"])
    assert set(elsewhere["totals"]["partition_errors"]) == {"6"}  # NOT_LEADER_OR_FOLLOWER
