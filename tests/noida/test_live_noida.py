"""Scenario: a real client fetches from a live noida-db (which answers every Fetch at once, so the client fetches
back to back) while tcpdump records the loopback; fetchtool decodes every Fetch the client says it sent, each
answered, with the correlation ids the client used (kafka-python logs each request it sends with its id)."""

from __future__ import annotations

import collections
import logging
import time

import pytest

from fetchtool.decoder import decode_capture
from fetchtool.exchange import Exchange

pytestmark = pytest.mark.noida

TOPIC = "orders"
RECORDS = [(p, f"key-{p}-{i}".encode(), f"value-{p}-{i}".encode()) for p in range(3) for i in range(3)]


class SentFetches(logging.Handler):
    """kafka-python's 'Sending request <correlation id> <request>' log lines, for Fetch requests."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.ids: collections.Counter = collections.Counter()

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg.startswith("%s Sending request") and type(record.args[2]).__name__.startswith("FetchRequest"):
            self.ids[record.args[1]] += 1


def test_every_fetch_kafka_python_sends_to_noida_is_decoded(noida_broker, tmp_path):
    from kafka import KafkaConsumer, TopicPartition
    from kafka_peer import LoopbackCapture

    noida_broker.seed(TOPIC, 3, RECORDS)
    sent = SentFetches()
    parser_log = logging.getLogger("kafka.protocol.parser")
    parser_log.addHandler(sent)
    level = parser_log.level
    parser_log.setLevel(logging.DEBUG)
    path = tmp_path / "live-noida.pcap"
    try:
        with LoopbackCapture(path, [noida_broker.port]):
            consumer = KafkaConsumer(bootstrap_servers=noida_broker.bootstrap, enable_auto_commit=False)
            consumer.assign([TopicPartition(TOPIC, p) for p in range(3)])
            consumer.seek_to_beginning()
            read, deadline = 0, time.monotonic() + 10
            while time.monotonic() < deadline and read < len(RECORDS):
                read += sum(len(r) for r in consumer.poll(timeout_ms=100).values())
            end = time.monotonic() + 0.3  # noida answers at once: a few hundred empty fetches follow
            while time.monotonic() < end:
                consumer.poll(timeout_ms=50)
            consumer.close()
    finally:
        parser_log.removeHandler(sent)
        parser_log.setLevel(level)

    assert read == len(RECORDS)
    run = decode_capture([path])
    fetches = [x for x in run if isinstance(x, Exchange) and x.api_key == 1]
    assert sum(sent.ids.values()) > 50  # back to back: noida ignores MaxWaitMs
    assert collections.Counter(x.correlation_id for x in fetches) == sent.ids
    # Each answered (the consumer closes after its last response arrives or gives up on it), session id 0.
    assert sum(x.response_frame is None for x in fetches) <= 1
    assert {x.response_session_id for x in fetches if x.response_frame is not None} == {0}
    records = sum(p.record_count for x in fetches for p in (x.response_partitions or ()))
    assert records == len(RECORDS)
    assert not run.report.warnings, run.report.warning_lines()
