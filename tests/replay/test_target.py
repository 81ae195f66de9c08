"""replay --broker: the target is made ready for the capture (versions, topics, records, leaders) before it starts.

The rules are sans-IO (fetch_version, records_to_write, not_ready); the whole preparation runs here against
`fetchtool broker` started fresh, as it does against Apache Kafka in tests/kafka/test_replay_real_kafka.py."""

from __future__ import annotations

import asyncio
import uuid

from fetchtool.broker.server import Broker
from fetchtool.broker.state import BrokerConfig
from fetchtool.protocol.codec import FetchResponseBody
from fetchtool.replay.driver import ReplayOptions, replay
from fetchtool.replay.plan import build_plan
from fetchtool.replay.target import ClusterView, fetch_version, not_ready, records_to_write, short_topics

from .scenario import Consumer, req, resp

KAFKA_4 = (4, 18)  # the Fetch versions Apache Kafka 4.x advertises


def test_a_capture_is_sent_in_the_nearest_fetch_version_the_target_speaks():
    assert fetch_version(18, KAFKA_4) == 18 and fetch_version(12, KAFKA_4) == 12
    assert fetch_version(3, KAFKA_4) == 4   # Kafka 4 dropped Fetch v0-v3
    assert fetch_version(19, KAFKA_4) == 18  # a client newer than the broker
    assert fetch_version(7, None) == 7  # the target did not say: as captured


def test_only_the_topics_the_replay_created_are_filled_up_to_the_rebased_captured_offsets():
    low = {("orders", 0): 1000, ("orders", 1): 0, ("theirs", 0): 0}
    high = {("orders", 0): 1500, ("orders", 1): 90_000, ("orders", 2): 0, ("theirs", 0): 700}
    assert records_to_write(low, high, ["orders"], limit=20_000) == {("orders", 0): 500, ("orders", 1): 20_000}


def test_a_partition_is_ready_once_it_has_a_leader_whatever_else_it_answers():
    parts = [resp("orders", 0, error=6), resp("orders", 1, error=100), resp("orders", 2, error=1), resp("orders", 3)]
    assert not_ready(FetchResponseBody(partitions=tuple(parts))) == [("orders", 0, 6), ("orders", 1, 100)]
    # a partition an erroneous answer leaves out (its topic id not known to the broker yet) is not ready either
    asked = [("orders", 2), ("orders", 3), ("orders", 4)]
    assert not_ready(FetchResponseBody(error_code=-1, partitions=tuple(parts[2:])), asked) == [("orders", 4, -1)]
    # tansu answers only the partitions that have data, without error: the others are not held back
    assert not_ready(FetchResponseBody(partitions=tuple(parts[2:])), asked) == []


def _consumer_from_offset_1000(version: int):
    c = Consumer("10.0.0.7:50000", version=version)
    parts = [req("orders", p, offset=1000) for p in range(2)]
    answer = [resp("orders", p, hw=1400) for p in range(2)]
    if version >= 7:
        c.fetch(0.0, 0, 0, parts, answer, response_session_id=77)
        for n in range(1, 5):
            c.fetch(0.1 * n, 77, n, [], [], response_session_id=77)
    else:
        for n in range(5):
            c.fetch(0.1 * n, 0, -1, parts, answer)
    return build_plan(c.exchanges)


def _replay_against_a_fresh_broker(plan, sessions_left: list | None = None):
    async def run():
        broker = Broker(BrokerConfig(port=0, auto_create_partitions=0))
        await broker.start()
        try:
            done = await replay(plan, ReplayOptions(broker=f"127.0.0.1:{broker.port}", create_topics=True,
                                                    as_fast=True, timeout_s=5))
            if sessions_left is not None:
                sessions_left.extend(broker.sessions())
            return done, broker.core.state
        finally:
            await broker.stop()

    return asyncio.run(run())


def test_a_fresh_broker_gets_the_topic_and_the_records_so_the_session_client_replays_without_errors():
    left: list = []
    run, state = _replay_against_a_fresh_broker(_consumer_from_offset_1000(12), left)
    assert run.prepared.created == ["orders"] and run.prepared.written == 2 * 400
    # offset 1000 became 0 on the target, the captured high watermark 1400 became its log end
    assert [state.topics.partition("orders", p).log_end_offset for p in range(2)] == [400, 400]
    (r,) = run.streams
    assert (r.tally.responses, r.tally.sessions_created, r.tally.incremental) == (5, 1, 4)
    assert dict(r.tally.errors) == {} and dict(r.partition_errors) == {}
    assert any("created orders" in n and "800 record(s)" in n for n in run.notes)
    # the capture ended with the session open: replay closed it, so it holds no slot of the target's cache
    assert run.closed_sessions == 1 and left == []


def test_a_fetch_version_the_target_no_longer_speaks_is_sent_as_its_oldest():
    run, _ = _replay_against_a_fresh_broker(_consumer_from_offset_1000(3))
    (r,) = run.streams
    assert r.tally.responses == 5 and dict(r.tally.errors) == {} and dict(r.partition_errors) == {}
    assert any("Fetch v4-v18: captured versions sent as v3->v4" in n for n in run.notes)


def test_an_existing_topic_with_too_few_partitions_is_said_and_not_waited_for():
    assert short_topics({"orders": 6, "audit": 1}, {"orders": 2, "audit": 3}) == {"orders": (2, 6)}

    async def run():
        broker = Broker(BrokerConfig(port=0, auto_create_partitions=0), topics={"orders": 1})
        await broker.start()
        try:
            return await replay(_consumer_from_offset_1000(12), ReplayOptions(
                broker=f"127.0.0.1:{broker.port}", create_topics=True, as_fast=True, timeout_s=5))
        finally:
            await broker.stop()

    run = asyncio.run(run())
    assert run.prepared.created == [] and run.prepared.written == 0  # someone else's topic is left as it is
    assert "orders has 1 partition(s) on 127.0.0.1:" in run.notes[0] and "the capture fetches 2" in run.notes[0]
    (r,) = run.streams
    assert r.tally.responses == 5 and dict(r.partition_errors) == {3: 5}  # partition 1 of 5 responses


def test_on_a_cluster_the_target_is_found_by_its_address_and_partitions_led_elsewhere_are_named():
    view = ClusterView({1: ("127.0.0.1", 9092), 2: ("127.0.0.1", 9093), 3: ("127.0.0.1", 9094)},
                       {"orders": uuid.uuid4()}, {"orders": [1, 2, 3, -1]})
    assert view.node_of("127.0.0.1", 9093) == 2
    assert view.node_of("kafka-2.example", 9093) is None  # a name the cluster does not advertise
    # partition 3 has no leader yet: not "elsewhere", the readiness probe waits for it
    assert view.led_elsewhere(2, {"orders": 4}) == [("orders", 0), ("orders", 2)]
    assert view.led_elsewhere(None, {"orders": 4}) == []
    alone = ClusterView({7: ("10.0.0.7", 9092)}, {}, {})
    assert alone.node_of("kafka.example", 9092) == 7  # a single broker is the target whatever it is called
