"""Every Fetch version v0-v18 and FetchSnapshot v0-v1: generate, encode, decode, compare; and cross-check
kio against kafka-python (both encoders must produce identical bytes, both decoders identical rows)."""

import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from fetchtool.exchange import ForgottenPartition, RequestPartition, ResponsePartition
from fetchtool.protocol import _fetch_flex, codec
from fetchtool.protocol._fetch_kio import request_from_kio, response_from_kio
from fetchtool.protocol._fetch_legacy import request_from_kp, request_to_kp, response_from_kp, response_to_kp
from fetchtool.protocol.records import summarize
from kafka.protocol.consumer.fetch import FetchRequest as KpReq, FetchResponse as KpResp

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
names = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=12)
uuids = st.uuids().map(str)


def batch(n: int, codec_id: int = 0) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec_id, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=1_700_000_000_000 + i, key=None, value=b"v" * 10, headers=[])
    return bytes(b.build())


blobs = st.one_of(
    st.none(),
    st.lists(st.integers(1, 5), min_size=1, max_size=3).map(lambda ns: b"".join(batch(n) for n in ns)),
    st.tuples(st.integers(1, 4), st.integers(1, 40)).map(lambda t: batch(t[0]) + batch(3)[: t[1]]),
)


@st.composite
def topic_keys(draw, version):
    if version >= 13:
        return None, draw(uuids)
    return draw(names), None


@st.composite
def fetch_requests(draw, version):
    parts = []
    for _ in range(draw(st.integers(0, 3))):
        topic, tid = draw(topic_keys(version))
        for p in draw(st.lists(st.integers(0, 1000), min_size=1, max_size=4)):
            parts.append(RequestPartition(
                topic, tid, p, draw(i64), draw(i32), draw(i64) if version >= 5 else -1,
                draw(i32) if version >= 9 else -1, draw(i32) if version >= 12 else -1))
    forgotten = []
    if version >= 7:
        for _ in range(draw(st.integers(0, 2))):
            topic, tid = draw(topic_keys(version))
            forgotten += [ForgottenPartition(topic, tid, p) for p in draw(st.lists(st.integers(0, 99), min_size=1, max_size=3))]
    return codec.FetchRequestBody(
        replica_id=draw(st.one_of(st.just(-1), st.integers(-3, 2**31 - 1))),
        max_wait_ms=draw(st.integers(0, 2**31 - 1)),
        # decoded as design.md's contract has it: null where the version has no such field, except the
        # session fields, which read as Kafka decodes them (0 / -1 before v7)
        min_bytes=draw(i32), max_bytes=draw(i32) if version >= 3 else None,
        isolation_level=draw(st.integers(0, 1)) if version >= 4 else None,
        session_id=draw(i32) if version >= 7 else 0, session_epoch=draw(i32) if version >= 7 else -1,
        rack_id=draw(st.text(max_size=8)) if version >= 11 else None,
        partitions=tuple(parts), forgotten=tuple(forgotten),
    )


KNOWN_ERRORS = [0, 1, 3, 6, 70, 71, 74, 100, 106]


@st.composite
def fetch_responses(draw, version):
    parts, recs = [], []
    for _ in range(draw(st.integers(0, 3))):
        topic, tid = draw(topic_keys(version))
        for p in draw(st.lists(st.integers(0, 1000), min_size=1, max_size=3)):
            blob = draw(blobs)
            s = summarize(blob)
            parts.append(ResponsePartition(
                topic, tid, p, draw(st.sampled_from(KNOWN_ERRORS)), draw(i64),
                draw(i64) if version >= 4 else -1, draw(i64) if version >= 5 else -1,
                draw(i32) if version >= 11 else -1, draw(st.integers(-1, 2**31 - 1)) if version >= 12 else -1,
                draw(st.integers(-1, 3)) if version >= 4 else -1, len(blob) if blob else 0,
                s.batches, s.records, s.compression))
            recs.append(blob)
    return codec.FetchResponseBody(
        throttle_time_ms=draw(st.integers(0, 2**31 - 1)) if version >= 1 else 0,
        error_code=draw(st.sampled_from(KNOWN_ERRORS)) if version >= 7 else 0,
        session_id=draw(i32) if version >= 7 else 0, partitions=tuple(parts), records=tuple(recs),
    )


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("version", range(19))
def test_fetch_request_round_trip_and_cross_decode(version):
    @SETTINGS
    @given(fetch_requests(version))
    def check(req):
        raw = codec.encode_request(1, version, req)
        assert codec.decode_request(1, version, raw) == req
        # kafka-python encodes the same message to the same bytes and decodes it to the same rows
        assert request_to_kp(req, version).encode(version=version) == raw
        assert request_from_kp(KpReq.decode(raw, version=version), version) == req
        if version >= 12:
            if version >= 15 and req.replica_id != -1:
                # a follower's ReplicaState is a tagged field: the fast path leaves such bodies to kio
                with pytest.raises(_fetch_flex.Unhandled):
                    _fetch_flex.read_request(raw, version, None)
            else:  # the plain shape: the fast path reads exactly what kio's entities give
                assert _fetch_flex.read_request(raw, version, None) == req
            assert request_from_kio(codec._kio_read(1, version, "request", raw), version, None) == req

    check()


@pytest.mark.parametrize("version", range(19))
def test_fetch_response_round_trip_and_cross_decode(version):
    @SETTINGS
    @given(fetch_responses(version))
    def check(resp):
        raw = codec.encode_response(1, version, resp)
        got = codec.decode_response(1, version, raw, keep_records=True)
        assert got == resp
        assert response_to_kp(resp, version).encode(version=version) == raw
        assert response_from_kp(KpResp.decode(raw, version=version), version, True) == resp
        if version >= 12:
            kio_rows = response_from_kio(codec._kio_read(1, version, "response", raw), version, None, True)
            assert kio_rows == resp
            if any(p.diverging_epoch != -1 for p in resp.partitions):
                # a diverging epoch is a tagged field: the fast path leaves such bodies to kio
                with pytest.raises(_fetch_flex.Unhandled):
                    _fetch_flex.read_response(raw, version, None, True)
            else:
                assert _fetch_flex.read_response(raw, version, None, True) == resp

    check()


@pytest.mark.parametrize("version", range(12, 19))
def test_fetch_fast_path_leaves_unusual_bodies_to_kio(version):
    # Damaged bodies: the fast path never returns rows kio would not; the codec's answer is kio's.
    @SETTINGS
    @given(fetch_responses(version), st.data())
    def check(resp, data):
        raw = codec.encode_response(1, version, resp)
        cut = raw[: data.draw(st.integers(0, len(raw) - 1))]
        extra = raw + data.draw(st.binary(min_size=1, max_size=3))
        for body in (cut, extra):
            # the fast path gives up (any of these); the caller then falls back to kio's decoder
            with pytest.raises((_fetch_flex.Unhandled, codec.CodecError, struct.error, IndexError, ValueError)):
                _fetch_flex.read_response(body, version, None, False)

    check()


@pytest.mark.parametrize("version", [0, 1])
def test_fetch_snapshot_round_trip(version):
    @SETTINGS
    @given(st.lists(st.tuples(st.integers(0, 9), i64, i32, i64, i32), max_size=4), st.integers(0, 2**31 - 1), blobs)
    def check(rows, max_bytes, blob):
        req = codec.FetchRequestBody(
            replica_id=1, max_wait_ms=None, min_bytes=None, max_bytes=max_bytes, isolation_level=None,
            session_id=None, session_epoch=None, rack_id=None,
            partitions=tuple(RequestPartition("__cluster_metadata", None, p, pos, -1, -1, le, -1, eo, ep)
                             for p, pos, le, eo, ep in rows))
        assert codec.decode_request(59, version, codec.encode_request(59, version, req)) == req
        s = summarize(blob)
        resp = codec.FetchResponseBody(
            throttle_time_ms=0, error_code=0, session_id=None,
            partitions=tuple(ResponsePartition("__cluster_metadata", None, p, 0, 4096, -1, pos, -1, -1, -1,
                                               len(blob or b""), s.batches, s.records, s.compression, eo, ep)
                             for p, pos, le, eo, ep in rows),
            records=tuple(blob or b"" for _ in rows))
        assert codec.decode_response(59, version, codec.encode_response(59, version, resp), keep_records=True) == resp

    check()


def test_the_fast_path_knows_exactly_the_error_codes_kio_knows():
    # the fast path writes kio's list out (so that decoding never imports kio); a kio with new codes shows here
    from kio.schema.errors import ErrorCode

    assert _fetch_flex.KNOWN_ERRORS == frozenset(int(e) for e in ErrorCode)


def test_unknown_error_code_falls_back_to_kafka_python():
    # kio's ErrorCode enum rejects codes newer than it knows; the decode must not fail because of that
    hw = 0x0102030405060708
    resp = codec.FetchResponseBody(0, 0, 7, (ResponsePartition("t", None, 0, 0, hw, 5, 0, -1, -1, -1, 0, 0, 0, None),))
    raw = bytearray(codec.encode_response(1, 11, resp))
    at = raw.index(hw.to_bytes(8, "big")) - 2  # the partition error code precedes the high watermark
    raw[at : at + 2] = (999).to_bytes(2, "big")
    got = codec.decode_response(1, 11, bytes(raw))
    assert got.partitions[0].error_code == 999


def test_api_versions_and_metadata():
    sw = codec.ClientSoftware("apache-kafka-java", "3.9.0")
    assert codec.decode_request(18, 3, codec.encode_request(18, 3, sw)) == sw
    tid = str(uuid.uuid4())
    names = codec.TopicNames({tid: "payments"})
    assert codec.decode_response(3, 12, codec.encode_response(3, 12, names)) == names
    with pytest.raises(codec.UnsupportedApi):
        codec.decode_request(0, 9, b"")


def test_truncated_body_is_a_codec_error():
    raw = codec.encode_request(1, 12, codec.FetchRequestBody(partitions=(RequestPartition("t", None, 0, 1, 2, -1, -1, -1),)))
    for cut in (1, 10, len(raw) - 1):
        with pytest.raises(codec.CodecError):
            codec.decode_request(1, 12, raw[:cut])
