"""The real peers fetchtool is checked against actually work here: tshark 4.4, the tansu broker and noida-db."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.tshark
def test_tshark_is_version_4_4(tshark):
    out = subprocess.run([tshark, "--version"], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.splitlines()[0].startswith("TShark (Wireshark) 4.4."), out.splitlines()[0]


def _manifest() -> list[dict]:
    path = REPO / "captures" / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else []


@pytest.mark.tshark
@pytest.mark.parametrize("entry", _manifest(), ids=lambda e: e["file"])
def test_tshark_sees_the_fetch_traffic_each_capture_is_documented_with(entry, tshark_fields, tmp_path):
    # Copy under a name with a space: the wrapper links captures into its chroot and must keep such paths intact.
    capture = tmp_path / f"copy of {entry['file']}"
    capture.write_bytes((REPO / "captures" / entry["file"]).read_bytes())
    rows = tshark_fields(capture, entry["broker_port"],
                         ["tcp.dstport", "kafka.api_version", "kafka.fetch_session_id", "kafka.fetch_session_epoch"],
                         "kafka.api_key == 1")
    requests = [r for r in rows if r[0] == str(entry["broker_port"])]
    assert sorted({int(r[1]) for r in requests}) == entry["fetch_versions"]
    assert len(requests) == entry["fetch_requests"]
    assert len(rows) - len(requests) == entry["fetch_responses"]
    sessions = {f"session_id={r[2]} epoch={r[3]}" for r in requests}
    assert sessions == set(entry["fetch_request_sessions"])


@pytest.mark.tshark
@pytest.mark.parametrize("entry", _manifest(), ids=lambda e: e["file"])
def test_each_capture_carries_exactly_the_documented_records(entry, tshark_fields):
    # tshark decodes every record in the Fetch responses (gzip batches too); it marks null keys/values <MISSING>
    # and prints timestamps as UTC dates ("Nov 24, 2025 16:00:00.001000000 UTC").
    def hex_or_missing(text):
        return "<MISSING>" if text is None else text.encode().hex()

    def epoch_ms(date):
        when = datetime.strptime(date[:-7], "%b %d, %Y %H:%M:%S.%f").replace(tzinfo=timezone.utc)
        return str(round(when.timestamp() * 1000))

    documented = {(hex_or_missing(r["key"]), hex_or_missing(r["value"]), str(r["timestamp_ms"]))
                  for r in json.loads((REPO / "captures" / "records.json").read_text())}
    rows = tshark_fields(REPO / "captures" / entry["file"], entry["broker_port"],
                         ["kafka.message_key", "kafka.message_value", "kafka.message_timestamp"],
                         "kafka.api_key == 1 && kafka.message_timestamp", aggregator="|")
    seen = set()
    for keys, values, timestamps in rows:
        keys, values, timestamps = keys.split("|"), values.split("|"), [epoch_ms(t) for t in timestamps.split("|")]
        assert len(keys) == len(values) == len(timestamps)
        seen |= set(zip(keys, values, timestamps))
    assert seen == documented


@pytest.mark.tansu
def test_tansu_round_trip_with_kafka_python(tansu_broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    host, port, create_topic = tansu_broker
    topic = create_topic(partitions=2)
    sent = {(p, f"key-{p}-{i}".encode(), f"value-{p}-{i}".encode()) for p in (0, 1) for i in range(5)}

    producer = KafkaProducer(bootstrap_servers=f"{host}:{port}", request_timeout_ms=10_000)
    for partition, key, value in sorted(sent):
        producer.send(topic, key=key, value=value, partition=partition)
    producer.flush(timeout=15)
    producer.close(timeout=5)

    consumer = KafkaConsumer(bootstrap_servers=f"{host}:{port}", group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=100, request_timeout_ms=10_000)
    try:
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        got: list[tuple[int, bytes, bytes]] = []
        for _ in range(50):
            for records in consumer.poll(timeout_ms=200).values():
                got += [(r.partition, r.key, r.value) for r in records]
            if len(got) >= len(sent):
                break
    finally:
        consumer.close()

    assert sorted(got) == sorted(sent)
    # Offsets within a partition follow production order.
    assert [k for p, k, _ in got if p == 0] == sorted(k for p, k, _ in sent if p == 0)


@pytest.mark.tansu
def test_tansu_broker_rejects_a_duplicate_topic(tansu_broker):
    name = tansu_broker.create_topic("twice", partitions=1)
    assert name == "twice"
    with pytest.raises(RuntimeError, match="already exists"):
        tansu_broker.create_topic("twice")


@pytest.mark.noida
def test_noida_serves_kafka_records_back_to_kafka_python(noida_broker):
    # The noida-db the tests use answers as a Kafka broker (and `noida-db version` named 0.2.3: the marker checked).
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=noida_broker.bootstrap)
    admin.create_topics([NewTopic("peer-check", 1, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=noida_broker.bootstrap)
    producer.send("peer-check", key=b"k", value=b"v", partition=0).get(timeout=10)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=noida_broker.bootstrap, enable_auto_commit=False)
    consumer.assign([TopicPartition("peer-check", 0)])
    consumer.seek_to_beginning()
    got = []
    for _ in range(50):
        got += [(r.key, r.value) for recs in consumer.poll(timeout_ms=100).values() for r in recs]
        if got:
            break
    consumer.close()
    assert got == [(b"k", b"v")]


@pytest.mark.parametrize("peer, variable, test", [
    ("tansu", "FETCHTOOL_TANSU", "test_tansu_broker_rejects_a_duplicate_topic"),
    ("noida", "FETCHTOOL_NOIDA", "test_noida_serves_kafka_records_back_to_kafka_python"),
])
@pytest.mark.parametrize("ci, outcome, exit_code", [("", "1 skipped", 0), ("1", "1 error", 1)])
def test_missing_peer_skips_locally_but_fails_under_ci(peer, variable, test, ci, outcome, exit_code):
    env = {**os.environ, variable: f"/nonexistent/{peer}", "CI": ci}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", f"tests/test_peers.py::{test}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )
    assert outcome in proc.stdout, proc.stdout[-2000:]
    assert proc.returncode == exit_code
    assert f"/nonexistent/{peer}" in proc.stdout


def test_ci_runs_exactly_the_readme_test_command():
    import re

    ci = (REPO / ".ci" / "run").read_text()
    command = re.search(r'^TEST_COMMAND="(.*)"', ci, re.M)[1]
    readme = REPO / "README.md"
    assert command in readme.read_text(), f".ci/run runs {command!r}, which README.md does not tell users to run"
