"""The codec on damaged bodies: whatever the bytes, decode_* answers with rows or a CodecError, nothing else;
null arrays Kafka's schema forbids are errors, not zero partitions; versions it does not know are their own
kind of error; fields a version does not carry are None (design.md), session fields Kafka's 0 / -1."""

from struct import pack

import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka_wire import fetch_request, fetch_response

from fetchtool.protocol import codec

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BODIES = [(1, v) for v in range(19)]


def _answer(decode, *args):
    try:
        return decode(*args)
    except codec.CodecError as exc:  # the only failure the callers catch
        return exc


def _valid_request(api_key, version):
    return codec.encode_request(api_key, version, fetch_request(n=2))


def _valid_response(api_key, version):
    return codec.encode_response(api_key, version, fetch_response(n=2))


@pytest.mark.parametrize("api_key,version", BODIES)
def test_random_and_mutated_bodies_only_ever_raise_codec_error(api_key, version):
    valid = (_valid_request(api_key, version), _valid_response(api_key, version))

    @SETTINGS
    @given(st.binary(max_size=120), st.data())
    def check(noise, data):
        for decode, good in zip((codec.decode_request, codec.decode_response), valid):
            _answer(decode, api_key, version, noise)
            # a real body with a few bytes overwritten (-1 lengths, zeros, 0xff) and cut or extended
            raw = bytearray(good)
            for _ in range(data.draw(st.integers(1, 4))):
                at = data.draw(st.integers(0, len(raw) - 1))
                raw[at : at + 4] = data.draw(st.sampled_from([b"\xff\xff\xff\xff", b"\x00\x00\x00\x00", b"\x80", b"\x01"]))
            cut = data.draw(st.integers(0, len(raw)))
            _answer(decode, api_key, version, bytes(raw[:cut]))
            _answer(decode, api_key, version, bytes(raw) + noise[:3])

    check()


HEAD_14 = pack(">iiiibii", -1, 500, 1, 1000, 0, 0, 0)  # replica, max wait, min/max bytes, isolation, session


@pytest.mark.parametrize("version,body", [
    (7, pack(">iiiibii", -1, 500, 1, 1000, 0, 0, 0) + pack(">i", -1) + pack(">i", 0)),  # Topics: int32 -1
    (12, HEAD_14 + b"\x00" + b"\x01" + b"\x01\x00" + b"\x00"),  # compact arrays: 0 is null
    (16, pack(">iiibii", 500, 1, 1000, 0, 0, 0) + b"\x00" + b"\x01" + b"\x01\x00" + b"\x00"),
    (18, pack(">iiibii", 500, 1, 1000, 0, 0, 0) + b"\x00" + b"\x01" + b"\x01\x00" + b"\x00"),
])
def test_a_request_with_null_topics_is_malformed_not_empty(version, body):
    # Kafka's FetchRequest.json: Topics has no nullableVersions; its generated reader throws on length -1
    with pytest.raises(codec.CodecError, match="Topics is null"):
        codec.decode_request(1, version, body)


@pytest.mark.parametrize("version,body", [
    (4, pack(">ii", 0, -1)),
    (7, pack(">ihii", 0, 0, 0, -1)),
    (12, pack(">ihi", 0, 0, 0) + b"\x00\x00"),
    (16, pack(">ihi", 0, 0, 0) + b"\x00\x00"),
])
def test_a_response_with_null_responses_is_malformed_not_empty(version, body):
    with pytest.raises(codec.CodecError, match="Responses is null"):
        codec.decode_response(1, version, body)


@pytest.mark.parametrize("api_key,version,kind", [(18, 5, "request"), (1, 19, "request"), (1, 19, "response"),
                                                  (59, 2, "request")])
def test_versions_the_codec_does_not_know_are_unsupported_not_malformed(api_key, version, kind):
    decode = codec.decode_request if kind == "request" else codec.decode_response
    with pytest.raises(codec.UnsupportedApi, match=f"v{version} {kind}: a version fetchtool does not decode"):
        decode(api_key, version, b"\x00" * 40)


@pytest.mark.parametrize("version", range(19))
def test_fields_the_version_does_not_carry_decode_as_none(version):
    body = codec.decode_request(1, version, codec.encode_request(1, version, fetch_request(n=1)))
    assert (body.max_bytes is None) == (version < 3)
    assert (body.isolation_level is None) == (version < 4)
    assert (body.rack_id is None) == (version < 11)
    if version < 7:  # design.md: as Kafka decodes them before v7
        assert (body.session_id, body.session_epoch) == (0, -1)


def test_a_snapshot_response_with_an_absurd_array_count_is_a_codec_error():
    # kio 0.6.5's native reader reserves memory for a compact array's count before reading it: a count of
    # billions aborts the process (SIGABRT). Run in a child, so a regression fails here instead of killing pytest.
    code = ("from fetchtool.protocol import codec\n"
            "try:\n codec.decode_response(59, 1, bytes.fromhex('800053ff000080ff80b977190000ff84ff000077cb000100'))\n"
            "except codec.CodecError:\n print('codec error')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout.strip()) == (0, "codec error"), out.stderr[-2000:]
