"""Idempotent producers: a retried batch is acknowledged with its first offset and never appended twice, and
sequences and epochs are checked as Kafka's ProducerStateManager does. A real idempotent producer that times out
during a broker stall and retries leaves every record in the log exactly once."""

from __future__ import annotations

import datetime
import io
import time

import pytest
from broker_scenarios import call, fetch_request, produce_request
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch

from fetchtool.broker import apis

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47


def batch(values, producer_id=1000, epoch=0, sequence=0) -> bytes:
    now = datetime.datetime.now(datetime.timezone.utc)
    records = tuple(Record(attributes=0, timestamp=now, offset=i, key=None, value=v, headers=())
                    for i, v in enumerate(values))
    buf = io.BytesIO()
    write_new_batch(buf, NewRecordBatch(producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
                                        records=records, attributes=0))
    return buf.getvalue()


def send(core, records: bytes, topic="t"):
    part = call(core, produce_request(topic, 0, records)).responses[0].partition_responses[0]
    return int(part.error_code), int(part.base_offset)


def log_end(core, topic="t") -> int:
    return core.state.topics.partition(topic, 0).log_end_offset


def test_a_retried_batch_is_acknowledged_with_its_first_offset_and_not_appended_again(core):
    broker = core(topics={"t": 1})
    first, second = batch([b"a", b"b"], sequence=0), batch([b"c"], sequence=2)
    assert send(broker, first) == (0, 0)
    assert send(broker, second) == (0, 2)
    assert send(broker, first) == (0, 0)     # the retry of an older in-flight batch too
    assert send(broker, second) == (0, 2)
    assert log_end(broker) == 3
    fetched = call(broker, fetch_request(12, [("t", 0, 0, 1 << 20)]))
    assert fetched.responses[0].partitions[0].records == (
        broker.state.topics.partition("t", 0).data)  # two batches, each once


def test_a_gap_in_the_sequence_is_out_of_order_and_nothing_is_appended(core):
    broker = core(topics={"t": 1})
    assert send(broker, batch([b"a"], sequence=0)) == (0, 0)
    assert send(broker, batch([b"c"], sequence=2)) == (OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
    assert log_end(broker) == 1
    assert send(broker, batch([b"b"], sequence=1)) == (0, 1)


def test_a_producer_new_to_the_partition_may_start_at_any_sequence(core):
    # Kafka accepts it: the producer's earlier records may have been deleted by retention.
    broker = core(topics={"t": 1})
    assert send(broker, batch([b"a"], sequence=7)) == (0, 0)
    assert send(broker, batch([b"b"], sequence=8)) == (0, 1)


def test_epochs_older_is_fenced_newer_must_start_at_sequence_zero(core):
    broker = core(topics={"t": 1})
    assert send(broker, batch([b"a"], epoch=1, sequence=0)) == (0, 0)
    assert send(broker, batch([b"b"], epoch=0, sequence=1)) == (INVALID_PRODUCER_EPOCH, -1)
    assert send(broker, batch([b"c"], epoch=2, sequence=5)) == (OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
    assert send(broker, batch([b"d"], epoch=2, sequence=0)) == (0, 1)
    assert send(broker, batch([b"a"], epoch=1, sequence=0)) == (INVALID_PRODUCER_EPOCH, -1)  # no dup in old epoch


def test_only_the_last_five_batches_are_remembered_as_kafka_does(core):
    broker = core(topics={"t": 1})
    batches = [batch([b"x"], sequence=i) for i in range(6)]
    for i, b in enumerate(batches):
        assert send(broker, b) == (0, i)
    assert send(broker, batches[1]) == (0, 1)                                   # fifth from the end
    assert send(broker, batches[0]) == (OUT_OF_ORDER_SEQUENCE_NUMBER, -1)       # sixth: forgotten
    assert log_end(broker) == 6


def test_producers_are_tracked_apart_and_plain_batches_are_never_deduplicated(core):
    broker = core(topics={"t": 1})
    assert send(broker, batch([b"a"], producer_id=1, sequence=0)) == (0, 0)
    assert send(broker, batch([b"a"], producer_id=2, sequence=0)) == (0, 1)
    plain = batch([b"p"], producer_id=-1, epoch=-1, sequence=-1)
    assert send(broker, plain) == (0, 2)
    assert send(broker, plain) == (0, 3)


def test_init_producer_id_hands_out_a_new_id_each_time(core):
    from kio.schema.init_producer_id.v4.request import InitProducerIdRequest

    broker = core()
    request = InitProducerIdRequest(transactional_id=None, transaction_timeout=datetime.timedelta(0),
                                    producer_id=-1, producer_epoch=-1)
    ids = {int(call(broker, request).producer_id) for _ in range(3)}
    assert len(ids) == 3 and min(ids) >= 0


def test_an_idempotent_producer_retrying_through_a_broker_stall_leaves_every_record_once(start_broker, monkeypatch):
    kafka = pytest.importorskip("kafka")
    real_produce = apis.HANDLERS[0]
    calls = {"n": 0}

    def stalled_produce(state, request):
        # The second Produce is appended, then the broker stalls past the producer's request timeout (as it did
        # for seconds behind a 250,000-partition fetch): the producer gives up on it and sends the batch again.
        response = real_produce(state, request)
        calls["n"] += 1
        if calls["n"] == 2:
            time.sleep(2.5)
        return response

    monkeypatch.setitem(apis.HANDLERS, 0, stalled_produce)
    bt = start_broker(topics={"orders": 1})
    producer = kafka.KafkaProducer(bootstrap_servers=bt.address, enable_idempotence=True, acks="all",
                                   request_timeout_ms=1000, linger_ms=20, retry_backoff_ms=50,
                                   delivery_timeout_ms=30000, client_id="idempotent")
    sent = [f"order-{i}".encode() for i in range(300)]
    try:
        futures = []
        for i, value in enumerate(sent):
            futures.append(producer.send("orders", value=value, partition=0))
            if i % 50 == 49:
                time.sleep(0.05)
        producer.flush(30)
        assert all(f.succeeded() for f in futures), [f.exception for f in futures if not f.succeeded()][:1]
    finally:
        producer.close(5)

    consumer = kafka.KafkaConsumer(bootstrap_servers=bt.address, group_id=None, enable_auto_commit=False,
                                   auto_offset_reset="earliest", fetch_max_wait_ms=100)
    consumer.assign([kafka.TopicPartition("orders", 0)])
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + 20
        while len(got) < len(sent) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(r.value for r in records)
        for records in consumer.poll(timeout_ms=500).values():   # anything more would be a duplicate
            got.extend(r.value for r in records)
    finally:
        consumer.close()
    assert got == sent
    assert bt.call(lambda: bt.broker.counters).get("duplicate_batches", 0) >= 1   # the retry came, not appended
