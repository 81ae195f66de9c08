"""Does tansu hold an empty fetch for MaxWaitMs as Apache Kafka does? fetchtool's verdict, on the committed tansu
captures and on a live tansu broker captured on loopback while kafka-python consumes an idle topic.

The live runs are the truth: an idle consumer's fetches come back empty, and the broker either waits for MaxWaitMs
(honoured, no MAX_WAIT_IGNORED) or not; with MaxWait 0 the client polls in a loop whatever the broker does
(MAX_WAIT_ZERO).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import kafka_peer
from fetchtool.analysis.run import analyze_capture

ROOT = Path(__file__).resolve().parents[2] / "captures"
TANSU_CAPTURES = sorted(ROOT.glob("*-tansu.pcap*"))


@pytest.mark.parametrize("pcap", TANSU_CAPTURES, ids=lambda p: p.name)
def test_committed_tansu_captures_show_max_wait_held(pcap):
    a = analyze_capture([pcap])
    [b] = a.brokers
    assert b.traffic.max_wait_checked >= 3 and b.traffic.max_wait_early == 0
    assert b.traffic.max_wait_honoured is True
    assert not [f for f in a.findings if f.code in ("MAX_WAIT_IGNORED", "MAX_WAIT_ZERO", "FETCH_ERROR_LOOP")]


def _idle_consumer(tansu_broker, capture: Path, max_wait_ms: int, seconds: float):
    """kafka-python assigned to an empty topic for `seconds`, captured on loopback."""
    from kafka import KafkaConsumer, TopicPartition

    topic = tansu_broker.create_topic(partitions=1)
    with kafka_peer.LoopbackCapture(capture, [tansu_broker.port]):
        consumer = KafkaConsumer(bootstrap_servers=tansu_broker.bootstrap, group_id=None, enable_auto_commit=False,
                                 auto_offset_reset="earliest", fetch_max_wait_ms=max_wait_ms,
                                 request_timeout_ms=10_000, client_id=f"idle-wait-{max_wait_ms}")  # fmt: skip
        try:
            consumer.assign([TopicPartition(topic, 0)])
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                assert not consumer.poll(timeout_ms=200)
        finally:
            consumer.close()
    return analyze_capture([capture])


@pytest.mark.tansu
def test_live_tansu_holds_an_idle_consumers_fetches_for_max_wait(tansu_broker, tmp_path):
    a = _idle_consumer(tansu_broker, tmp_path / "idle.pcap", 300, 4.0)
    [b] = a.brokers
    t = b.traffic
    assert t.max_wait_checked >= 5, t
    assert t.max_wait_honoured is True and t.max_wait_early == 0, t
    assert t.response_ms["p50"] >= 300 * 0.99, t  # held for MaxWait (to within the sketch's 1%)
    assert not [f for f in a.findings if f.code == "MAX_WAIT_IGNORED"]


@pytest.mark.tansu
def test_live_kafka_python_with_max_wait_zero_polls_in_a_loop(tansu_broker, tmp_path):
    a = _idle_consumer(tansu_broker, tmp_path / "spin.pcap", 0, 3.0)
    [f] = [f for f in a.findings if f.code == "MAX_WAIT_ZERO"]
    assert f.client_id == "idle-wait-0" and f.count >= 20
    [b] = a.brokers
    assert b.traffic.max_wait_checked == 0  # MaxWait 0 asks for no wait: nothing to hold the broker to
    assert not [f for f in a.findings if f.code == "MAX_WAIT_IGNORED"]
