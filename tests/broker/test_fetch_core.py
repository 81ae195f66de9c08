"""Fetch through the broker's sans-IO core: session contexts from fetchtool.sessions, KIP-74 reads, delays."""

from __future__ import annotations

import uuid

from broker_scenarios import call, fetch_request, produce, response_partitions

from fetchtool.broker.handler import Reply, Wait
from fetchtool.broker.rawclient import make_batch


def test_full_fetch_creates_session_then_incremental_returns_only_changed_partitions(core):
    broker = core(topics={"orders": 2})
    produce(broker, "orders", 0, [b"a", b"b"])
    produce(broker, "orders", 1, [b"c"])
    full = call(broker, fetch_request(12, [("orders", 0, 0, 1 << 20), ("orders", 1, 0, 1 << 20)], epoch=0))
    assert full.error_code == 0 and full.session_id != 0
    assert [p[:3] for p in response_partitions(full)] == [("orders", 0, 0), ("orders", 1, 0)]
    assert broker.fetch.cache.metrics()["NumIncrementalFetchSessions"] == 1
    assert broker.fetch.cache.metrics()["NumIncrementalFetchPartitionsCached"] == 2

    # Nothing changed: an incremental request at the new offsets gets an empty response in the same session.
    inc = call(broker, fetch_request(12, [("orders", 0, 2, 1 << 20), ("orders", 1, 1, 1 << 20)],
                                     session_id=full.session_id, epoch=1))
    assert (inc.error_code, inc.session_id, response_partitions(inc)) == (0, full.session_id, [])

    # New data on partition 1 only: only partition 1 comes back, with its records.
    produce(broker, "orders", 1, [b"d"])
    inc2 = call(broker, fetch_request(12, [], session_id=full.session_id, epoch=2))
    (only,) = response_partitions(inc2)
    assert only[:4] == ("orders", 1, 0, 2) and only[4] > 0
    kinds = [(s.context, s.epoch, s.response_session_id) for s in broker.fetch.history]
    assert kinds == [("full", 0, full.session_id), ("incremental", 1, full.session_id),
                     ("incremental", 2, full.session_id)]


def test_session_errors_answer_at_once_with_session_id_zero_even_with_a_long_max_wait(core):
    broker = core(topics={"t": 1})
    full = call(broker, fetch_request(12, [("t", 0, 0, 1000)], epoch=0))
    ok = call(broker, fetch_request(12, [], session_id=full.session_id, epoch=1))
    assert ok.error_code == 0
    replay = call(broker, fetch_request(12, [], session_id=full.session_id, epoch=1, max_wait_ms=30_000))
    assert (replay.error_code, replay.session_id, replay.responses) == (71, 0, ())
    broker.fetch.reset()  # as after a broker restart
    gone = call(broker, fetch_request(12, [], session_id=full.session_id, epoch=2, max_wait_ms=30_000))
    assert (gone.error_code, gone.session_id, gone.responses) == (70, 0, ())


def test_out_of_range_session_id_gets_unknown_server_error_with_partition_errors_below_v13(core):
    broker = core(topics={"t": 1})
    response = call(broker, fetch_request(12, [("t", 0, 0, 1000)], session_id=2_147_483_647, epoch=1))
    assert (response.error_code, response.session_id) == (-1, 2_147_483_647)
    assert [p[:3] for p in response_partitions(response)] == [("t", 0, -1)]


def test_first_batch_is_returned_whole_beyond_both_limits_and_later_partitions_get_nothing(core):
    broker = core(topics={"big": 2})
    produce(broker, "big", 0, [b"x" * 500])
    produce(broker, "big", 1, [b"y" * 500])
    response = call(broker, fetch_request(12, [("big", 0, 0, 100), ("big", 1, 0, 100)], max_bytes=200))
    (p0, p1) = response_partitions(response)
    batch = len(make_batch([b"x" * 500]))
    assert p0[4] == batch  # > partition max 100 and > response max 200 (KIP-74 minOneMessage)
    assert p1[4] == 0  # its first batch does not fit what is left: empty, not a truncated batch (v3+)


def test_after_the_first_partition_reads_are_cut_at_the_limit_leaving_a_partial_batch(core):
    broker = core(topics={"t": 1})
    produce(broker, "t", 0, [b"a" * 300])
    produce(broker, "t", 0, [b"b" * 300])
    batch = len(make_batch([b"a" * 300]))
    response = call(broker, fetch_request(12, [("t", 0, 0, batch + 40)]))
    ((_, _, _, hw, size),) = response_partitions(response)
    assert hw == 2 and size == batch + 40  # one whole batch and 40 bytes of the next


def test_unknown_topic_ids_come_after_readable_partitions_with_error_100(core):
    broker = core(topics={"known": 1})
    known_id = broker.state.topics.get("known").topic_id
    produce(broker, "known", 0, [b"v"])
    stranger = uuid.uuid4()
    response = call(broker, fetch_request(13, [("ghost", 0, 0, 1000), ("known", 0, 0, 1000)],
                                          topic_ids={"known": known_id, "ghost": stranger}, epoch=0))
    parts = response_partitions(response)
    assert [(p[0], p[1], p[2]) for p in parts] == [(known_id, 0, 0), (stranger, 0, 100)]
    assert response.session_id != 0


def test_unknown_topic_name_and_out_of_range_offset_are_partition_errors(core):
    broker = core(topics={"t": 1})
    produce(broker, "t", 0, [b"v"])
    response = call(broker, fetch_request(11, [("t", 0, 5, 1000), ("nope", 0, 0, 1000)], max_wait_ms=10_000))
    assert [p[:3] for p in response_partitions(response)] == [("t", 0, 1), ("nope", 0, 3)]


def test_fetch_waits_for_min_bytes_and_completes_when_a_produce_arrives(core):
    broker = core(topics={"t": 1})
    frame_action = _fetch_action(broker, fetch_request(12, [("t", 0, 0, 1000)], max_wait_ms=5000, min_bytes=1))
    assert isinstance(frame_action, Wait)
    pending = frame_action.pending
    assert not broker.fetch.ready(pending)
    produce(broker, "t", 0, [b"late"])
    assert broker.fetch.ready(pending)
    reply = broker.complete_fetch(pending, now_ms=100)
    assert isinstance(reply, Reply)


def test_an_incremental_fetch_with_nothing_new_waits_but_its_epoch_is_already_advanced(core):
    broker = core(topics={"t": 1})
    full = call(broker, fetch_request(12, [("t", 0, 0, 1000)], epoch=0))
    action = _fetch_action(broker, fetch_request(12, [], session_id=full.session_id, epoch=1, max_wait_ms=500))
    assert isinstance(action, Wait)
    assert broker.fetch.cache.get(full.session_id).epoch == 2  # Kafka bumps the epoch in newContext


def _fetch_action(broker, request):
    from fetchtool.broker import wire

    frame = wire.encode_request(1, 9, request)[4:]
    return broker.handle_frame(frame, "127.0.0.1:50001", 0)
