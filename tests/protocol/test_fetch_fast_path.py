"""The Fetch fast path (protocol/_fetch_flex.py) keeps the rows it made of a topic's request entries, by their
bytes: a consumer's requests repeat most of them. A kept row must be the one a fresh decode would make."""

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_codec_roundtrip import fetch_requests, fetch_responses

from fetchtool.exchange import Exchange, RequestPartition
from fetchtool.pipeline.tables import exchanges_batch, partitions_batch
from fetchtool.protocol import _fetch_flex, codec
from fetchtool.protocol.packed import PackedEntries


def _request(version: int, parts: tuple[RequestPartition, ...]) -> bytes:
    body = codec.FetchRequestBody(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20,
                                  isolation_level=0, session_id=7, session_epoch=3, rack_id="",
                                  partitions=parts, forgotten=())
    return codec.encode_request(1, version, body)


def test_a_repeated_request_entry_decodes_to_the_same_row_under_each_topic_name():
    tid = str(uuid.uuid4())
    parts = (RequestPartition(None, tid, 0, 42, 1 << 20, -1, 5, 4), RequestPartition(None, tid, 1, 43, 1 << 20, -1, 5, 4))
    raw = _request(13, parts)
    unnamed = _fetch_flex.read_request(raw, 13, None).partitions
    assert unnamed == parts
    # the same bytes once a Metadata response named the topic: the kept rows must not answer for it
    named = _fetch_flex.read_request(raw, 13, {tid: "orders"}).partitions
    assert [p.topic for p in named] == ["orders", "orders"]
    assert named == tuple(p._replace(topic="orders") for p in parts)
    assert _fetch_flex.read_request(raw, 13, None).partitions == parts


def test_a_repeated_entry_beside_a_changed_one_decodes_as_a_fresh_request_would():
    parts = tuple(RequestPartition("t", None, p, 100 + p, 1 << 20, -1, 5, 4) for p in range(6))
    first = _fetch_flex.read_request(_request(12, parts), 12, None)
    moved = parts[:2] + (parts[2]._replace(fetch_offset=999),) + parts[3:]
    second = _fetch_flex.read_request(_request(12, moved), 12, None)
    assert first.partitions == parts and second.partitions == moved


def test_an_entry_with_tagged_fields_is_left_to_kio_even_after_the_same_entry_without_them():
    parts = (RequestPartition("t", None, 0, 7, 1 << 20, -1, 5, 4),)
    raw = _request(12, parts)
    _fetch_flex.read_request(raw, 12, None)
    at = raw.index(bytes([0, 0, 0, 0, 0, 0, 0, 5]))  # partition 0, current leader epoch 5: the entry's start
    tagged = bytearray(raw)
    tagged[at + 32] = 1  # the entry's tagged-field count
    try:
        _fetch_flex.read_request(bytes(tagged), 12, None)
    except _fetch_flex.Unhandled:
        pass
    else:
        raise AssertionError("a tagged field in a partition entry must go to kio")


# -- counts only (rows=False): what `decode --format jsonl` reads -----------------------------------------
def _outcome(read, *args):
    """What the codec's caller sees of a fast-path read: the body, CodecError (no fallback), or any other
    exception (kio decides)."""
    try:
        return read(*args)
    except codec.CodecError:
        return "codec error"
    except Exception:  # noqa: BLE001
        return "fallback"


def _request_counts(body):
    if isinstance(body, str):
        return body
    return (body.replica_id, body.max_wait_ms, body.min_bytes, body.max_bytes, body.isolation_level,
            body.session_id, body.session_epoch, body.rack_id, len(body.partitions), len(body.forgotten))


def _response_counts(body):
    if isinstance(body, str):
        return body
    return (body.throttle_time_ms, body.error_code, body.session_id,
            [(p.error_code, p.records_bytes) for p in body.partitions])


def _mutations(raw: bytes, data) -> list[bytes]:
    out = [raw, raw[:data.draw(st.integers(0, max(0, len(raw) - 1)))]]
    for _ in range(3):
        b = bytearray(raw)
        if b:
            b[data.draw(st.integers(0, len(b) - 1))] = data.draw(st.sampled_from([0, 1, 2, 0x7F, 0x80, 0xFF]))
        out.append(bytes(b))
    return out


@pytest.mark.parametrize("version", range(12, 19))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_request_counted_only_counts_what_its_rows_would_and_fails_where_they_would(version, data):
    raw = codec.encode_request(1, version, data.draw(fetch_requests(version)))
    for body in _mutations(raw, data):
        full = _outcome(_fetch_flex.read_request, body, version, None)
        counted = _outcome(_fetch_flex.read_request, body, version, None, False)
        assert _request_counts(counted) == _request_counts(full)


@pytest.mark.parametrize("version", range(12, 19))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_response_counted_only_counts_what_its_rows_would_and_fails_where_they_would(version, data):
    raw = codec.encode_response(1, version, data.draw(fetch_responses(version)))
    for body in _mutations(raw, data):
        full = _outcome(_fetch_flex.read_response, body, version, None, False)
        counted = _outcome(_fetch_flex.read_response, body, version, None, False, False)
        assert _response_counts(counted) == _response_counts(full)


def test_every_single_byte_damage_is_judged_alike_counted_or_not():
    # Each byte of a response (plain entries, one with records, one with aborted transactions) and of a request,
    # set to each of a few values: counted only, the body reads the same or fails the same way.
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    builder.append(0, timestamp=1_700_000_000_000, key=None, value=b"v", headers=[])
    batch = bytes(builder.build())
    from fetchtool.exchange import ResponsePartition

    parts = (ResponsePartition("t", None, 0, 0, 9, 9, 0, -1, -1, -1, 0, 0, 0, None),
             ResponsePartition("t", None, 1, 0, 9, 9, 0, -1, -1, 2, len(batch), 1, 1, "none"),
             ResponsePartition("t", None, 2, 0, 9, 9, 0, -1, -1, -1, 0, 0, 0, None))
    response = codec.encode_response(1, 12, codec.FetchResponseBody(0, 0, 7, parts, (None, batch, b"")))
    request = _request(12, tuple(RequestPartition("t", None, p, 100 + p, 1 << 20, -1, 5, 4) for p in range(3)))
    for i in range(len(response)):
        for value in (0, 1, 0x7F, 0x80, 0xFF):
            body = response[:i] + bytes([value]) + response[i + 1:]
            full = _outcome(_fetch_flex.read_response, body, 12, None, False)
            assert _response_counts(_outcome(_fetch_flex.read_response, body, 12, None, False, False)) == \
                _response_counts(full), (i, value)
    for i in range(len(request)):
        for value in (0, 1, 0x7F, 0x80, 0xFF):
            body = request[:i] + bytes([value]) + request[i + 1:]
            full = _outcome(_fetch_flex.read_request, body, 12, None)
            assert _request_counts(_outcome(_fetch_flex.read_request, body, 12, None, False)) == \
                _request_counts(full), (i, value)


def test_the_rows_kept_are_bounded_and_forgetting_them_changes_no_row(monkeypatch):
    monkeypatch.setattr(_fetch_flex, "_ROWS_KEPT", 4)
    _fetch_flex._ROWS.clear()
    _fetch_flex._kept[0] = 0
    for start in range(0, 30, 3):
        parts = tuple(RequestPartition("t", None, p, 1000 + start + p, 1 << 20, -1, 5, 4) for p in range(3))
        assert _fetch_flex.read_request(_request(12, parts), 12, None).partitions == parts
        assert sum(map(len, _fetch_flex._ROWS.values())) <= 4 + 3  # the bound, plus one topic's entries


# -- packed (rows="packed"): what `decode --out` reads --------------------------------------------------------
def _exchange(version: int, request=None, response=None) -> Exchange:
    return Exchange("cap.pcap", 1, 10, 11, 1.0, 1.5, "10.0.0.1:5000", "10.0.0.2:9092", 1, version, 7, "c", None,
                    -1, 0, 0, 500, 1, 1 << 20, 0, None, 0, 0, 0, 100, 200,
                    request.partitions if request else (), request.forgotten if request else (),
                    response.partitions if response else None)


def _same_tables(version: int, full, packed, kind: str) -> None:
    """packed reads as full does (the same outcome), its entries packed, and the tables hold the same rows."""
    if isinstance(full, str):
        assert packed == full
        return
    assert not isinstance(packed, str), packed
    args = {kind: full}
    got = {kind: packed}
    entries = packed.partitions
    assert type(entries) is PackedEntries or not entries
    assert partitions_batch([_exchange(version, **got)]).equals(partitions_batch([_exchange(version, **args)]))
    assert exchanges_batch([_exchange(version, **got)]).equals(exchanges_batch([_exchange(version, **args)]))


def _names(version: int, data, entries) -> dict[str, str] | None:
    """Metadata's names for some of the topic ids (v13+), or none."""
    ids = sorted({p.topic_id for p in entries if p.topic_id})
    if version < 13 or not ids or not data.draw(st.booleans()):
        return None
    return {tid: f"topic-{i}" for i, tid in enumerate(ids) if data.draw(st.booleans())}


@pytest.mark.parametrize("version", range(12, 19))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_request_read_packed_writes_the_partition_rows_its_rows_would(version, data):
    drawn = data.draw(fetch_requests(version))
    names = _names(version, data, drawn.partitions + drawn.forgotten)
    raw = codec.encode_request(1, version, drawn)
    for body in _mutations(raw, data):
        full = _outcome(_fetch_flex.read_request, body, version, names)
        packed = _outcome(_fetch_flex.read_request, body, version, names, "packed")
        _same_tables(version, full, packed, "request")
        if not isinstance(packed, str):
            assert type(packed.forgotten) is PackedEntries or not packed.forgotten


@pytest.mark.parametrize("version", range(12, 19))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_response_read_packed_writes_the_partition_rows_its_rows_would(version, data):
    # entries with records, aborted transactions or both among plain ones, wherever they fall in a topic
    drawn = data.draw(fetch_responses(version))
    names = _names(version, data, drawn.partitions)
    raw = codec.encode_response(1, version, drawn)
    for body in _mutations(raw, data):
        full = _outcome(_fetch_flex.read_response, body, version, names, False)
        packed = _outcome(_fetch_flex.read_response, body, version, names, False, "packed")
        _same_tables(version, full, packed, "response")
