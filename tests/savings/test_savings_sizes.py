"""The frame sizes savings sums up must equal what the real codec encodes, for every Fetch version."""

from __future__ import annotations

import random

import pytest

from fetchtool.analysis.savings import sizes as size
from fetchtool.exchange import ForgottenPartition, RequestPartition, ResponsePartition
from fetchtool.protocol.codec import FetchRequestBody, FetchResponseBody, encode_request, encode_response
from fetchtool.protocol.headers import FETCH, encode_request_header, encode_response_header


def _keys(version, rows):
    return [size.topic_key(version, r.topic, r.topic_id) for r in rows]


@pytest.mark.parametrize("version", range(0, 19))
def test_request_and_response_sizes_equal_full_encodes(version):
    rng = random.Random(version)
    for _ in range(12):
        topics = [f"topic-{'x' * rng.choice([0, 5, 150])}{i}" for i in range(rng.randint(1, 4))]
        ids = [f"5f1a0e4c-0d4e-4c3b-9a57-{i:012d}" for i in range(len(topics))]
        n = rng.choice([0, 1, 5, 127, 300])   # 127+ partitions of a topic need a 2-byte varint from v12
        which = [rng.randrange(len(topics)) if rng.random() < 0.3 else i * len(topics) // max(n, 1) for i in range(n)]
        named = version < 13
        parts = [RequestPartition(topics[t] if named else None, None if named else ids[t], i, rng.randrange(1 << 40),
                                  rng.randrange(1 << 20), -1, -1, -1) for i, t in enumerate(which)]
        forgotten = [ForgottenPartition(topics[0] if named else None, None if named else ids[0], i)
                     for i in range(rng.choice([0, 3, 200]))] if version >= 7 else []
        client_id = rng.choice([None, "", "consumer-1", "c" * 300])
        rack = rng.choice(["", "eu-west-1a"]) if version >= 11 else ""
        body = FetchRequestBody(partitions=tuple(parts), forgotten=tuple(forgotten), rack_id=rack)
        wire = 4 + len(encode_request_header(FETCH, version, 7, client_id)) + len(encode_request(FETCH, version, body))
        assert size.request_frame_size(version, client_id, -1, rack, _keys(version, parts),
                                       _keys(version, forgotten)) == wire

        rows, blobs = [], []
        for i, t in enumerate(which):
            records = rng.choice([0, 0, 12, 126, 127, 5000, 70000])
            aborted = rng.choice([-1, -1, 0, 1, 3, 130]) if version >= 4 else -1
            diverging = rng.choice([-1, -1, 4]) if version >= 12 else -1
            rows.append(ResponsePartition(topics[t] if named else None, None if named else ids[t], i, 0, 9, 9, 0, -1,
                                          diverging, aborted, records, 0, 0, None))
            blobs.append(b"r" * records if records else None)
        body = FetchResponseBody(partitions=tuple(rows), records=tuple(blobs))
        wire = 4 + len(encode_response_header(FETCH, version, 7)) + len(encode_response(FETCH, version, body))
        assert size.response_frame_size(version, _keys(version, rows), [r.records_bytes for r in rows],
                                        [r.aborted_transactions for r in rows],
                                        [r.diverging_epoch for r in rows]) == wire


def test_a_follower_request_sizes_with_its_replica_state():
    parts = (RequestPartition(None, "5f1a0e4c-0d4e-4c3b-9a57-000000000001", 0, 5, 100, 0, 3, 2),)
    for version in (14, 15, 16, 17):
        body = FetchRequestBody(replica_id=2, partitions=parts)
        wire = 4 + len(encode_request_header(FETCH, version, 1, "broker-2")) + len(encode_request(FETCH, version, body))
        assert size.request_frame_size(version, "broker-2", 2, "", _keys(version, parts)) == wire
