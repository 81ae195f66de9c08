"""Live: kafka-python consumers on a small cache when their broker is SIGKILLed and restarted.

What the committed captures lack: the Java client reconnects after a restart with a full fetch naming its old
session, but kafka-python keeps sending incremental fetches, so Kafka answers FETCH_SESSION_ID_NOT_FOUND (70) from
the restarted node, whose cache starts empty. The cache (8 slots, 1 per shard) is too small for the 10 consumers,
so Kafka refuses two of them a session before the restart.

The run is recorded like captures/kafka/ (tcpdump on lo, the node's sessions.log and requests.log, a record.json
with the kill and restart times), then held to the same verdicts as the committed captures
(test_verdicts_sessions.py, test_verdicts_cache_pressure.py), plus: every 70 from the restarted node has cause
broker_restart.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import broker_record as br
import test_verdicts_cache_pressure as pressure
import test_verdicts_sessions as verdicts
import kafka_peer
from test_decode_matches_kafka import assert_decode_matches_request_log

pytestmark = pytest.mark.kafka

KAFKA = {"nodes": 1, "cache_slots": 8}
CONSUMERS = 10

POLL = """
import os, sys, time
from kafka import KafkaConsumer, TopicPartition
bootstrap, topic, count, stop_file = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
consumers = []
for i in range(count):
    c = KafkaConsumer(bootstrap_servers=bootstrap, client_id=f"kp-{i}", fetch_max_wait_ms=100,
                      reconnect_backoff_ms=200, request_timeout_ms=5000)
    c.assign([TopicPartition(topic, i)])
    consumers.append(c)
end = time.time() + 120  # at most; the test creates stop_file when it has seen enough
while time.time() < end and not os.path.exists(stop_file):
    for c in consumers:
        try:
            c.poll(timeout_ms=20)
        except Exception:
            pass
for c in consumers:
    c.close()
"""


@pytest.fixture(scope="module")
def restart_run(kafka, tmp_path_factory) -> Path:
    """The recorded run: captures-style files in a temporary folder; returns the pcap's path."""
    out = tmp_path_factory.mktemp("live-restart")
    kafka.create_topic("orders", 12)
    node = kafka.nodes[0]
    pcap = out / "live-restart.pcap"
    events = []
    dump = kafka_peer.LoopbackCapture(pcap, [node.port]).start()
    start = time.time()
    stop_file = out / "stop"
    poller = subprocess.Popen([sys.executable, "-c", POLL, kafka.bootstrap, "orders", str(CONSUMERS), str(stop_file)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(5)
        # The consumers are frozen across the restart (as when they are busy processing), so they next speak to
        # the restarted node with their old sessions' incremental fetches.
        poller.send_signal(signal.SIGSTOP)
        events.append({"time": time.time(), "event": f"SIGKILL node {node.node_id}", "node_id": node.node_id})
        kafka.kill_node(node, signal.SIGKILL)
        kafka.start_node(node)
        events.append({"time": time.time(), "event": f"node {node.node_id} accepting", "node_id": node.node_id})
        poller.send_signal(signal.SIGCONT)
        time.sleep(6)  # the consumers reconnect and fetch from the restarted node
        stop_file.touch()
        poller.wait(timeout=60)
    finally:
        if poller.poll() is None:
            poller.send_signal(signal.SIGCONT)
            poller.kill()
            poller.wait()
        time.sleep(1.2)  # the closes reach the capture
        dump.stop()
    shutil.copy(node.sessions_log, out / "live-restart.sessions.log")
    shutil.copy(node.requests_log, out / "live-restart.requests.log")
    (out / "live-restart.record.json").write_text(json.dumps({
        "name": "live-restart", "file": pcap.name,
        "cluster": {"nodes": 1, "cache_slots": KAFKA["cache_slots"], "cache_shards": 8},
        "nodes": [{"node_id": node.node_id, "port": node.port, "controller_port": node.controller_port,
                   "sessions_log": "live-restart.sessions.log", "requests_log": "live-restart.requests.log"}],
        "captured_ports": [node.port], "capture_start_time": start, "capture_stop_time": time.time(),
        "events": events,
    }))
    return pcap


def test_kafka_answered_70s_from_the_restarted_broker_and_refused_sessions(restart_run):
    """The scenario happened as intended (Kafka's record, not fetchtool's)."""
    run = br.load_run(restart_run)
    assert run.node_deaths(), "the record has no kill"
    assert [e for e in run.record.all_errors if e.code == br.FETCH_SESSION_ID_NOT_FOUND]
    assert any(log.refused for log in run.sessions.values())


def test_the_live_restart_is_decoded_as_kafka_logged_it(restart_run):
    run = br.load_run(restart_run)
    deaths = {n: t for n, t, _ in run.node_deaths()}
    assert_decode_matches_request_log(restart_run, run.record.fetches, [int(run.node_broker["node1"].split(":")[1])],
                                      lambda rec: deaths.get(f"node{rec.replica_id}") if rec.replica_id >= 0 else None,
                                      lambda row: run.answered_near_kill(row["broker"], row["response_ts"]))


@pytest.mark.parametrize("verdict", [
    verdicts.test_fetchtool_finds_exactly_the_sessions_kafka_created,
    verdicts.test_each_session_belongs_to_the_connection_kafka_gave_it_to,
    verdicts.test_each_session_starts_with_the_partitions_kafka_cached,
    verdicts.test_every_incremental_epoch_adds_and_forgets_what_kafka_logged,
    verdicts.test_each_session_counts_the_incremental_fetches_kafka_accepted,
    verdicts.test_every_session_error_kafka_answered_is_a_finding,
    verdicts.test_error_70_is_blamed_on_eviction_only_where_kafka_evicted,
    verdicts.test_error_70_is_blamed_on_eviction_only_where_kafka_evicted_given_the_cache_size,
    pressure.test_every_refused_session_is_a_cache_full_finding_for_its_client,
], ids=lambda f: f.__name__)
def test_the_committed_capture_verdicts_hold_on_the_live_restart(verdict, restart_run):
    verdict(restart_run)


def test_every_70_from_the_restarted_broker_is_blamed_on_the_restart(restart_run):
    verdicts.test_every_70_after_a_broker_restart_is_blamed_on_the_restart(restart_run)


def test_no_session_is_reported_alive_after_the_broker_was_killed(restart_run):
    verdicts.test_no_session_is_reported_alive_after_its_broker_died(restart_run)


def sessions_killed_with_the_broker(run: br.RecordedRun) -> dict[int, br.FetchRecord]:
    """Session id -> its owner's first Fetch to the restarted node that names it, for every session the node
    created before it was SIGKILLed."""
    (node, killed, back), = run.node_deaths()
    doomed = {c.session_id for c in run.sessions[node].created if c.ts < killed}
    first: dict[int, br.FetchRecord] = {}
    for f in sorted(run.record.fetches, key=lambda f: f.received_ts):
        if f.received_ts > killed and f.session_id in doomed and f.session_id not in first:
            first[f.session_id] = f
    return first


def test_sessions_kafka_answered_70_after_the_restart_end_lost(restart_run):
    run = br.load_run(restart_run)
    answered_70 = {sid for sid, f in sessions_killed_with_the_broker(run).items() if f.error_code == 70}
    if not answered_70:
        pytest.skip("every consumer reopened its session with a full fetch after the restart")
    ends = {s["session_id"]: (s["end"], s["end_reason"]) for s in verdicts.analyze_json(restart_run)["sessions"]}
    assert {sid: ends[sid][0] for sid in answered_70} == {sid: "lost" for sid in answered_70}


def test_a_session_its_client_reopened_after_the_restart_was_lost_not_closed(restart_run):
    run = br.load_run(restart_run)
    reopened = {sid for sid, f in sessions_killed_with_the_broker(run).items() if f.session_epoch == 0}
    if not reopened:
        pytest.skip("every consumer kept sending incremental fetches after the restart")
    ends = {s["session_id"]: s["end"] for s in verdicts.analyze_json(restart_run)["sessions"]}
    assert {sid: ends[sid] for sid in reopened} == {sid: "lost" for sid in reopened}
