"""Real clients against `fetchtool broker`: kafka-python (KIP-227 sessions), confluent-kafka and aiokafka."""

from __future__ import annotations

import asyncio
import time

import pytest

kafka = pytest.importorskip("kafka")
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402


def _history(bt):
    return bt.call(lambda: list(bt.broker.fetch_history))


def _consume(consumer, want: int, timeout: float = 15.0) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            got.extend(r.value for r in records)
    return got


def _kafka_python_consumer(bt, topic, partitions):
    consumer = KafkaConsumer(bootstrap_servers=bt.address, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=100, client_id="kp-consumer")
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    return consumer


def _produce_default(bt, topic, values):
    producer = KafkaProducer(bootstrap_servers=bt.address)  # DEFAULT settings (idempotent, acks=all in 3.x)
    for v in values:
        producer.send(topic, value=v)
    producer.flush(10)
    producer.close(5)


def test_kafka_python_session_goes_incremental_and_reads_back_exactly_what_was_produced(start_broker):
    bt = start_broker(topics={"orders": 3})
    sent = [f"order-{i}".encode() for i in range(500)]
    _produce_default(bt, "orders", sent)

    consumer = _kafka_python_consumer(bt, "orders", 3)
    try:
        got = _consume(consumer, len(sent))
        _consume(consumer, 1, timeout=1.0)  # a few more round trips with nothing new
    finally:
        consumer.close()
    assert sorted(got) == sorted(sent) and len(got) == len(sent)

    fetches = [h for h in _history(bt) if h.client_id == "kp-consumer"]
    first = fetches[0]
    assert (first.context, first.session_id, first.epoch) == ("full", 0, 0)
    session = first.response_session_id
    assert session != 0
    incremental = [h for h in fetches if h.context == "incremental"]
    assert len(incremental) >= 3
    assert {h.session_id for h in incremental} == {session}
    epochs = [h.epoch for h in incremental]
    assert epochs == list(range(1, len(epochs) + 1))  # 1, 2, 3, ... with no gap or repeat
    assert all(h.error_code == 0 for h in fetches)
    metrics = bt.call(bt.broker.session_metrics)
    assert metrics["NumIncrementalFetchSessions"] == 1
    assert metrics["NumIncrementalFetchPartitionsCached"] == 3


def test_dropped_sessions_give_kafka_python_error_70_and_it_recovers_without_loss_or_duplicates(start_broker):
    bt = start_broker(topics={"events": 2})
    first_half = [f"e-{i}".encode() for i in range(200)]
    second_half = [f"e-{i}".encode() for i in range(200, 400)]
    _produce_default(bt, "events", first_half)
    consumer = _kafka_python_consumer(bt, "events", 2)
    try:
        got = _consume(consumer, len(first_half))
        assert bt.call(bt.broker.drop_all_sessions) == 1  # as after a broker restart
        _produce_default(bt, "events", second_half)
        got += _consume(consumer, len(second_half))
        _consume(consumer, 1, timeout=1.0)
    finally:
        consumer.close()
    assert sorted(got) == sorted(first_half + second_half) and len(got) == 400

    fetches = [h for h in _history(bt) if h.client_id == "kp-consumer"]
    errors = [i for i, h in enumerate(fetches) if h.error_code]
    assert errors and fetches[errors[0]].error_code == 70 and fetches[errors[0]].response_session_id == 0
    old_session = fetches[errors[0]].session_id
    retry = fetches[errors[0] + 1]
    assert (retry.context, retry.session_id, retry.epoch) == ("full", 0, 0)  # INITIAL after NOT_FOUND
    assert retry.response_session_id not in (0, old_session)
    after = [h for h in fetches[errors[0] + 2:] if h.context == "incremental"]
    assert after and after[0].session_id == retry.response_session_id and after[0].epoch == 1


def test_confluent_kafka_reads_back_its_data_without_a_session(start_broker):
    ck = pytest.importorskip("confluent_kafka")
    bt = start_broker(topics={"ck": 2})
    producer = ck.Producer({"bootstrap.servers": bt.address})
    sent = [f"ck-{i}".encode() for i in range(200)]
    for i, v in enumerate(sent):
        producer.produce("ck", value=v, partition=i % 2)
    assert producer.flush(10) == 0
    consumer = ck.Consumer({"bootstrap.servers": bt.address, "group.id": "ck-test", "enable.auto.commit": False,
                            "fetch.wait.max.ms": 100, "client.id": "ck-consumer"})
    consumer.assign([ck.TopicPartition("ck", p, ck.OFFSET_BEGINNING) for p in range(2)])
    got: list[bytes] = []
    deadline = time.monotonic() + 15
    try:
        while len(got) < len(sent) and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                got.append(msg.value())
    finally:
        consumer.close()
    assert sorted(got) == sorted(sent)
    fetches = [h for h in _history(bt) if h.client_id == "ck-consumer"]
    assert fetches and {(h.session_id, h.epoch, h.context) for h in fetches} == {(0, -1, "sessionless")}
    assert {h.version for h in fetches} == {16}  # librdkafka 2.16 uses topic ids
    assert bt.call(bt.broker.session_metrics)["NumIncrementalFetchSessions"] == 0


def test_aiokafka_reads_back_its_data_without_a_session(start_broker):
    aiokafka = pytest.importorskip("aiokafka")
    bt = start_broker(topics={"aio": 2})
    sent = [f"aio-{i}".encode() for i in range(200)]

    async def scenario() -> list[bytes]:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bt.address)
        await producer.start()
        try:
            for i, v in enumerate(sent):
                await producer.send("aio", v, partition=i % 2)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bt.address, enable_auto_commit=False,
                                             fetch_max_wait_ms=100, client_id="aio-consumer")
        await consumer.start()
        got: list[bytes] = []
        try:
            tps = [aiokafka.TopicPartition("aio", p) for p in range(2)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            deadline = time.monotonic() + 15
            while len(got) < len(sent) and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    got.extend(r.value for r in records)
        finally:
            await consumer.stop()
        return got

    got = asyncio.run(scenario())
    assert sorted(got) == sorted(sent)
    fetches = [h for h in _history(bt) if h.client_id == "aio-consumer"]
    assert fetches and {(h.session_id, h.epoch) for h in fetches} == {(0, -1)}
