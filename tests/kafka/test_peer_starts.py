"""The reference broker itself: a KRaft node starts on loopback, takes a topic and records sessions in its log."""

import pytest

pytestmark = pytest.mark.kafka

KAFKA = {"nodes": 1, "cache_slots": 16}


def test_a_single_kraft_node_serves_a_topic_and_logs_its_session_cache(kafka):
    kafka.create_topic("orders", 3)
    node = kafka.nodes[0]
    assert node.alive and node.bootstrap.startswith("127.0.0.1:")
    # The loggers fetchtool's verdicts are held to are wired: the request log saw the topic's creation.
    assert "CREATE_TOPICS" in node.requests_log.read_text()
    props = (node.workdir / "server.properties").read_text()
    assert "max.incremental.fetch.session.cache.slots=16" in props
