"""The Fetch fast path (protocol/_fetch_flex.py) keeps the rows it made of a topic's request entries, by their
bytes: a consumer's requests repeat most of them. A kept row must be the one a fresh decode would make."""

import uuid

from fetchtool.exchange import RequestPartition
from fetchtool.protocol import _fetch_flex, codec


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
