"""The guard in front of kio's native reader: a damaged array count is a CodecError, never a dead process.

kio 0.6.5 reserves memory for an array's claimed count before reading it, so a count of billions aborts the
process (SIGABRT), which no except clause catches. Anything that might reach that abort runs in a child process
here, so a regression fails a test instead of killing pytest.
"""

import io
import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader, entity_writer
from kio.schema.errors import ErrorCode
from kio.static.primitive import Records, i32Timedelta

from fetchtool.protocol import kio_guard, codec

HERE = Path(__file__).parent
REAL = {tuple(k.split("/")): bytes.fromhex(hx)
        for k, (_capture, hx) in json.loads((HERE / "kio_bodies.json").read_text())["bodies"].items()}

# Every (api key, version, kind) fetchtool hands to kio.
KIO_BODIES = (
    [(1, v, kind) for v in range(4, 19) for kind in ("request", "response")]
    + [(59, v, kind) for v in (0, 1) for kind in ("request", "response")]
    + [(18, v, "request") for v in (3, 4)]
    + [(3, v, "response") for v in range(10, 14)]
)

st.register_type_strategy(Records, st.binary(max_size=40))  # kio registers strategies for all its types but this


def _write(entity_type, value) -> bytes:
    buf = io.BytesIO()
    entity_writer(entity_type)(buf, value)
    return buf.getvalue()


def _decode(api_key, version, kind, body):
    decode = codec.decode_request if kind == "request" else codec.decode_response
    try:
        return decode(api_key, version, body)
    except codec.CodecError as exc:  # the only failure callers catch
        return exc


@pytest.mark.parametrize("api_key,version,kind", KIO_BODIES)
def test_the_guard_walks_exactly_the_bytes_kio_reads(api_key, version, kind):
    # the guard follows kio's schema field by field: on any body kio reads, it ends where kio ends
    entity = codec._kio_entity(api_key, version, kind)

    @settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.from_type(entity))
    def check(value):
        body = _write(entity, value)
        assert kio_guard.check(entity, body) == entity_reader(entity)(body, 0)[1] == len(body)
        assert kio_guard.reader(entity)(body)[1] == len(body)  # the read every kio body goes through

    check()
    real = REAL.get((str(api_key), str(version), kind))
    if real is not None:
        assert kio_guard.check(entity, real) == len(real)


def test_a_snapshot_response_claiming_billions_of_node_endpoints_in_a_tagged_field_is_malformed():
    # FetchSnapshot v1's NodeEndpoints is a tagged field (tag 0): counts there are read by kio all the same
    from kio.schema.fetch_snapshot.v1.response import FetchSnapshotResponse

    body = codec.encode_response(59, 1, codec.FetchResponseBody(session_id=None))
    assert body.endswith(b"\x00")  # no tagged fields
    damaged = body[:-1] + b"\x01" + b"\x00" + b"\x06" + b"\xff\xff\xff\xff\x0f" + b"\x00"  # 1 tag: 0, size, count
    with pytest.raises(kio_guard.ArrayTooLong) as err:
        kio_guard.check(FetchSnapshotResponse, damaged)
    assert err.value.count == 0xFFFF_FFFF - 1
    with pytest.raises(kio_guard.ArrayTooLong):  # before kio's reader ever sees it
        kio_guard.reader(FetchSnapshotResponse)(damaged)
    assert isinstance(_decode(59, 1, "response", damaged), codec.CodecError)


def test_structs_in_a_tagged_field_are_walked_with_their_own_tags_as_kio_reads_them():
    # FetchSnapshot v1 response: NodeEndpoints (tag 0) holds flexible structs, each with its own tag section
    from kio.schema.fetch_snapshot.v1 import response as r

    endpoints = (r.NodeEndpoint(node_id=1, host="b1", port=9092), r.NodeEndpoint(node_id=2, host="b2", port=9093))
    value = r.FetchSnapshotResponse(throttle_time=i32Timedelta.parse(timedelta(0)), error_code=ErrorCode.none,
                                    topics=(), node_endpoints=endpoints)
    body = _write(r.FetchSnapshotResponse, value)
    assert kio_guard.check(r.FetchSnapshotResponse, body) == entity_reader(r.FetchSnapshotResponse)(body, 0)[1]
    assert kio_guard.check(r.FetchSnapshotResponse, body) == len(body)
    # the second endpoint (last on the wire) claims a tag NodeEndpoint does not have: kio refuses it, the guard
    # stops there
    assert body[-1] == 0  # its tagged-field count
    unknown_tag = body[:-1] + b"\x01\x07\x00"  # one tagged field: tag 7, size 0
    assert kio_guard.check(r.FetchSnapshotResponse, unknown_tag) is None
    with pytest.raises(KeyError):
        entity_reader(r.FetchSnapshotResponse)(unknown_tag, 0)
    assert isinstance(_decode(59, 1, "response", unknown_tag), codec.CodecError)


def test_a_legacy_array_count_past_the_body_is_malformed():
    # Fetch v7 response: Responses is an int32-counted array; 2^31-1 entries needs 16 GB of reservation
    body = bytearray(REAL[("1", "7", "response")])
    body[10:14] = b"\x7f\xff\xff\xff"  # throttle (4), error code (2), session id (4), then the Responses count
    with pytest.raises(kio_guard.ArrayTooLong):
        kio_guard.check(codec._kio_entity(1, 7, "response"), bytes(body))
    assert isinstance(_decode(1, 7, "response", bytes(body)), codec.CodecError)


# -- the property, in a child process ------------------------------------------------------------------------
# Overwrites that make a length or count absurd in either encoding, or null, or zero.
PATCHES = [b"\xff\xff\xff\xff\x0f", b"\x7f\xff\xff\xff", b"\xff\xff\xff\x7f", b"\x80\x80\x80\x80\x08",
           b"\xff\xff", b"\x00\x00\x00\x00", b"\x00", b"\x01", b"\x80", b"\xff"]
FUZZED = [(a, v, k) for (a, v, k) in KIO_BODIES if a != 1 or v in (4, 7, 11, 12, 13, 18)]


def _fuzz_in_this_process(n_examples: int, last: Path) -> None:
    """Mutated bodies (real ones and kio-generated ones): each decode answers or raises CodecError, and where
    kio reads a body the guard let through, the guard walked it to the same byte."""
    runs = [0]

    @settings(max_examples=n_examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(FUZZED), st.data())
    def fuzz(key, data):
        api_key, version, kind = key
        entity = codec._kio_entity(api_key, version, kind)
        real = REAL.get((str(api_key), str(version), kind))
        body = bytearray(real if real is not None and data.draw(st.booleans()) else
                         _write(entity, data.draw(st.from_type(entity))))
        for _ in range(data.draw(st.integers(1, 3))):
            at = data.draw(st.integers(0, max(0, len(body) - 1)))
            patch = data.draw(st.sampled_from(PATCHES) | st.binary(min_size=1, max_size=5))
            body[at : at + len(patch)] = patch
        body = bytes(body[: data.draw(st.integers(0, len(body)))] if data.draw(st.booleans()) else body)
        last.write_text(f"{api_key} {version} {kind} {body.hex()}")  # what to replay if the process dies
        try:
            end = kio_guard.check(entity, body)
        except kio_guard.ArrayTooLong:
            pass  # the codec answers CodecError: checked below
        else:
            try:  # kio unguarded is safe here: this is what the guard vouched for
                size = entity_reader(entity)(body, 0)[1]
            except Exception:  # noqa: BLE001  (kio's own errors on damaged bytes)
                pass
            else:
                assert end == size  # kio read it all: so did the guard, to the same byte
        _decode(api_key, version, kind, body)  # anything but a CodecError propagates and fails
        runs[0] += 1

    fuzz()
    print(f"{runs[0]} mutated bodies decoded or rejected")


def test_mutated_bodies_only_ever_decode_or_raise_codec_error_never_abort(tmp_path):
    last = tmp_path / "last-body"
    out = subprocess.run([sys.executable, __file__, "300", str(last)], capture_output=True, text=True,
                         timeout=300, cwd=HERE, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, (f"child exited {out.returncode} on (api key, version, kind, body) "
                                 f"{last.read_text() if last.exists() else None}:\n{out.stderr[-3000:]}")
    assert int(out.stdout.split()[0]) >= 300


if __name__ == "__main__":
    _fuzz_in_this_process(int(sys.argv[1]), Path(sys.argv[2]))


def test_a_body_of_no_fields_has_nothing_to_count():
    # ApiVersions v0-v2 requests: every client's first request to a broker
    from kio.schema.api_versions.v0.request import ApiVersionsRequest

    assert kio_guard.check(ApiVersionsRequest, b"\x00\x12header", 8) == 8
