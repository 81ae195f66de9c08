"""Scenario: every Fetch exchange fetchtool decodes agrees, field by field, with decoders nobody on the team wrote.

Captures: the real-client captures in captures/ (kafka-python, confluent-kafka, aiokafka against tansu), the
scenario captures in captures/scenarios/, and a generated sweep of every Fetch version v0-v18 plus FetchSnapshot.
tshark 4.4 checks Fetch v0-v16 (it knows no later version and no FetchSnapshot, whose frames and correlation ids
it still pairs); kafka-python checks Fetch v0-v18 from tshark's own reassembly of the TCP streams.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from fetchtool.decoder import decode_capture
from fetchtool.exchange import Exchange

from .independent import kafka_python_fetches, tshark_frames, tshark_opened_pairs, tshark_streams
from .sweep import write_sweep

pytestmark = pytest.mark.tshark

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = sorted(p for p in (ROOT / "captures").rglob("*") if p.suffix in (".pcap", ".pcapng", ".gz")
                  and not p.name.endswith(".log.gz")  # captures/kafka keeps the broker's logs beside its captures
                  and not any(part.startswith(".") for part in p.relative_to(ROOT).parts))
TSHARK_MAX_FETCH = 16


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sweep") / "sweep.pcap"
    write_sweep(path)
    return path


def captures_and_sweep():
    return [pytest.param(p, id=str(p.relative_to(ROOT))) for p in CAPTURES] + [pytest.param(None, id="sweep")]


def ours(path) -> list[Exchange]:
    return [x for x in decode_capture([path]) if isinstance(x, Exchange)]


def broker_ports(exchanges) -> set[int]:
    return {int(ex.broker.rsplit(":", 1)[1]) for ex in exchanges} or {9092}


def ints(values) -> list[int]:
    return [int(v) for v in values]


def runs(values) -> list:
    """Collapse consecutive repeats: per-partition topics -> the topic entries on the wire. Applied to tshark's
    entries too: a client may send one topic in several consecutive entries (@platformatic/kafka does, with the
    all-zero topic id noida-db gives every topic), which per-partition rows cannot tell from one entry."""
    return [v for i, v in enumerate(values) if i == 0 or values[i - 1] != v]


@pytest.mark.parametrize("capture", captures_and_sweep())
def test_every_fetch_exchange_agrees_with_tshark(capture, sweep, tshark):
    path = capture or sweep
    exchanges = ours(path)
    frames = tshark_frames(tshark, path, broker_ports(exchanges))
    assert exchanges or not frames, "tshark saw Kafka traffic that fetchtool did not decode"

    # Same set of exchanges: every Fetch/FetchSnapshot request tshark saw is one of ours, and vice versa.
    tshark_requests = {n for n, f in frames.items()
                       if f["kafka.api_key"][:1] in (["1"], ["59"]) and not f["kafka.request_frame"]}
    assert tshark_requests == {ex.request_frame for ex in exchanges}

    compared = 0
    for ex in exchanges:
        req = frames[ex.request_frame]
        assert ints(req["kafka.correlation_id"]) == [ex.correlation_id]
        assert ints(req["kafka.api_version"]) == [ex.api_version]
        if ex.response_frame is not None:
            resp = frames[ex.response_frame]
            assert ints(resp["kafka.request_frame"]) == [ex.request_frame]
            assert ints(resp["kafka.correlation_id"]) == [ex.correlation_id]
        if ex.api_key != 1 or ex.api_version > TSHARK_MAX_FETCH:
            continue
        check_request(ex, req)
        if ex.response_frame is not None:
            check_response(ex, frames[ex.response_frame])
        compared += 1
    assert compared or not any(ex.api_key == 1 and ex.api_version <= TSHARK_MAX_FETCH for ex in exchanges)


def check_request(ex: Exchange, f: dict) -> None:
    v, parts = ex.api_version, ex.request_partitions
    assert ints(f["kafka.max_wait_time"]) == [ex.max_wait_ms]
    assert ints(f["kafka.min_bytes"]) == [ex.min_bytes]
    # tshark's kafka.max_bytes holds the request's MaxBytes (v3+) then every PartitionMaxBytes.
    assert ints(f["kafka.max_bytes"]) == ([ex.max_bytes] if v >= 3 else []) + [p.partition_max_bytes for p in parts]
    assert ints(f["kafka.partition_id"]) == [p.partition for p in parts]
    assert ints(f["kafka.offset"]) == [p.fetch_offset for p in parts]
    if v < 15:
        assert ints(f["kafka.replica_id"]) == [ex.replica_id]
    if v >= 4:
        assert ints(f["kafka.isolation_level"]) == [ex.isolation_level]
    if v >= 5:
        assert ints(f["kafka.log_start_offset"]) == [p.log_start_offset for p in parts]
    if v >= 7:
        assert ints(f["kafka.fetch_session_id"]) == [ex.session_id]
        assert ints(f["kafka.fetch_session_epoch"]) == [ex.session_epoch]
        forgotten = ex.forgotten_partitions
        assert ints(f["kafka.forgotten_topic_partition"]) == [p.partition for p in forgotten]
        if v >= 13:
            assert runs(f["kafka.forgotten_topic_id"]) == runs([p.topic_id for p in forgotten])
        else:
            assert runs(f["kafka.forgotten_topic_name"]) == runs([p.topic for p in forgotten])
    if v >= 9:
        assert ints(f["kafka.leader_epoch"]) == [p.current_leader_epoch for p in parts]
    if v >= 12:
        assert ints(f["kafka.last_fetched_epoch"]) == [p.last_fetched_epoch for p in parts]
    if v >= 13:
        assert runs(f["kafka.topic_id"]) == runs([p.topic_id for p in parts])
    else:
        assert runs(f["kafka.topic_name"]) == runs([p.topic for p in parts])
    if v >= 11:
        assert f["kafka.rack"] == ([ex.rack_id] if ex.rack_id else [])


def check_response(ex: Exchange, f: dict) -> None:
    v, parts = ex.api_version, ex.response_partitions
    assert ints(f["kafka.partition_id"]) == [p.partition for p in parts]
    # kafka.error: the top-level error (v7+) then each partition's
    assert ints(f["kafka.error"]) == ([ex.error_code] if v >= 7 else []) + [p.error_code for p in parts]
    if v >= 1:
        assert ints(f["kafka.throttle_time"]) == [ex.throttle_time_ms]
    if v >= 4:
        assert ints(f["kafka.last_stable_offset"]) == [p.last_stable_offset for p in parts]
    if v >= 5:
        assert ints(f["kafka.log_start_offset"]) == [p.log_start_offset for p in parts]
    if v >= 7:
        assert ints(f["kafka.fetch_session_id"]) == [ex.response_session_id]
    if v >= 13:
        assert runs(f["kafka.topic_id"]) == runs([p.topic_id for p in parts])
    else:
        assert runs(f["kafka.topic_name"]) == runs([p.topic for p in parts])


@pytest.mark.parametrize("capture", captures_and_sweep())
def test_every_fetch_exchange_agrees_with_kafka_python(capture, sweep, tshark):
    path = capture or sweep
    by_pair: dict[tuple[str, str], list[Exchange]] = defaultdict(list)
    for ex in ours(path):
        if ex.api_key == 1:
            by_pair[(ex.client, ex.broker)].append(ex)
    theirs = kafka_python_fetches(tshark_streams(tshark, path))
    compared = 0
    framed = sum(len(decoded) for decoded in theirs.values())
    for pair, decoded in theirs.items():
        mine = by_pair.get(pair, [])
        # A stream tshark could not frame from its start (mid-stream capture) is absent from `theirs`; every
        # stream it framed must match ours exchange for exchange, in order.
        assert [ex.correlation_id for ex in mine][-len(decoded):] == [d["correlation_id"] for d in decoded]
        for ex, d in zip(mine[-len(decoded):], decoded):
            check_against_kafka_python(ex, d)
            compared += 1
    assert compared == framed
    # kafka-python checked every Fetch exchange we decoded on every connection the capture saw open; only those
    # opened before the capture began (mid-stream, e.g. brokers' replica fetchers) may not be framed from their
    # first byte.
    opened = tshark_opened_pairs(tshark, path)
    assert all(len(theirs.get(pair, [])) == len(mine) for pair, mine in by_pair.items() if pair in opened)


def uuid_text(value) -> str:
    """kafka-python decodes the all-zero topic id (Kafka's ZERO_UUID, which noida-db gives every topic) as None."""
    return "00000000-0000-0000-0000-000000000000" if value is None else str(value)


def _attr(obj, name, default):
    value = getattr(obj, name, default)
    return default if value is None and default is not None else value


def check_against_kafka_python(ex: Exchange, d: dict) -> None:
    v = d["version"]
    req = d["request"]
    assert ex.api_version == v and ex.request_bytes == d["request_bytes"]
    replica = req.replica_state.replica_id if v >= 15 and req.replica_state else _attr(req, "replica_id", -1)
    assert (ex.replica_id, ex.max_wait_ms, ex.min_bytes) == (replica if v < 15 or req.replica_state else -1,
                                                             req.max_wait_ms, req.min_bytes)
    if v >= 3:
        assert ex.max_bytes == req.max_bytes
    if v >= 4:
        assert ex.isolation_level == req.isolation_level
    expected_session = (req.session_id, req.session_epoch) if v >= 7 else (0, -1)
    assert (ex.session_id, ex.session_epoch) == expected_session
    wanted = []
    for t in req.topics:
        key = uuid_text(t.topic_id) if v >= 13 else t.topic
        for p in t.partitions:
            wanted.append((key, p.partition, p.fetch_offset, p.partition_max_bytes,
                           _attr(p, "log_start_offset", -1) if v >= 5 else -1,
                           _attr(p, "current_leader_epoch", -1) if v >= 9 else -1,
                           _attr(p, "last_fetched_epoch", -1) if v >= 12 else -1))
    assert [((p.topic_id if v >= 13 else p.topic), p.partition, p.fetch_offset, p.partition_max_bytes,
             p.log_start_offset, p.current_leader_epoch, p.last_fetched_epoch)
            for p in ex.request_partitions] == wanted
    forgotten = [((uuid_text(t.topic_id) if v >= 13 else t.topic), p)
                 for t in (req.forgotten_topics_data or []) for p in t.partitions] if v >= 7 else []
    assert [((p.topic_id if v >= 13 else p.topic), p.partition) for p in ex.forgotten_partitions] == forgotten
    if v >= 11:
        assert ex.rack_id == req.rack_id

    resp = d.get("response")
    if resp is None:
        assert ex.response_partitions is None
        return
    assert ex.response_bytes == d["response_bytes"]
    assert ex.throttle_time_ms == (resp.throttle_time_ms if v >= 1 else 0)
    assert (ex.error_code, ex.response_session_id) == ((resp.error_code, resp.session_id) if v >= 7 else (0, 0))
    got = []
    for t in resp.responses:
        key = uuid_text(t.topic_id) if v >= 13 else t.topic
        for p in t.partitions:
            blob = p.records or b""
            diverging = p.diverging_epoch.epoch if v >= 12 and p.diverging_epoch else -1
            aborted = -1 if v < 4 or p.aborted_transactions is None else len(p.aborted_transactions)
            got.append((key, p.partition_index, p.error_code, p.high_watermark,
                        p.last_stable_offset if v >= 4 else -1, p.log_start_offset if v >= 5 else -1,
                        p.preferred_read_replica if v >= 11 else -1, diverging, aborted, len(blob),
                        *batches_of(bytes(blob))))
    assert [((p.topic_id if v >= 13 else p.topic), p.partition, p.error_code, p.high_watermark,
             p.last_stable_offset, p.log_start_offset, p.preferred_read_replica, p.diverging_epoch,
             p.aborted_transactions, p.records_bytes, p.record_batches, p.record_count)
            for p in ex.response_partitions] == got


def batches_of(blob: bytes) -> tuple[int, int]:
    """(whole batches, records) as kafka-python's MemoryRecords reads them; a compressed magic 0/1 wrapper
    counts as one record, as fetchtool never decompresses."""
    from kafka.record.memory_records import MemoryRecords

    records = MemoryRecords(blob)
    batches = count = 0
    while (batch := records.next_batch()) is not None:
        batches += 1
        count += batch.records_count if batch.magic == 2 else 1
    return batches, count
