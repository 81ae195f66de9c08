"""Misbehaving peers on raw sockets: each gets Kafka's error or is closed; everyone else keeps being served."""

from __future__ import annotations

import logging
import socket
import struct
import time

import pytest
from broker_scenarios import closed_by_broker, fetch_request, metadata_request
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from fetchtool.broker import wire
from fetchtool.broker.rawclient import RawClient


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _header(key: int, version: int, corr: int = 1, client: bytes = b"bad") -> bytes:
    return struct.pack(">hhih", key, version, corr, len(client)) + client


def _healthy(bt) -> None:
    """Another client is served normally."""
    with RawClient("127.0.0.1", bt.port) as other:
        response = other.call(metadata_request(12, ["healthy"]))
        assert [t.name for t in response.topics] == ["healthy"] and response.topics[0].error_code == 0
        fetched = other.call(fetch_request(12, [("healthy", 0, 0, 1000)]))
        assert fetched.error_code == 0


@pytest.fixture
def bt(start_broker, caplog):
    caplog.set_level(logging.INFO)
    return start_broker(topics={"healthy": 1}, max_frame_bytes=64 * 1024, partial_frame_timeout_ms=300)


@pytest.fixture(autouse=True)
def no_tracebacks_in_the_log(caplog):
    yield
    for record in caplog.records:
        assert record.exc_info is None, record.getMessage()
        assert "\n" not in record.getMessage(), record.getMessage()
        assert "Traceback" not in record.getMessage()


def test_malformed_body_closes_that_connection_after_answering_what_came_before(bt):
    good = wire.encode_request(18, 1, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    bad = _frame(_header(3, 12, corr=2) + b"\x00\x05\xff")  # Metadata v12 with a truncated body
    with socket.create_connection(("127.0.0.1", bt.port)) as sock:
        sock.sendall(good + bad)
        sock.settimeout(5)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = sock.recv(65536)
            assert chunk, "the reply to the request before the bad frame was lost"
            data += chunk
        corr, response = wire.decode_response(data[4:], 18, 3)
        assert corr == 1 and response.error_code == 0
        assert closed_by_broker(sock)
    _healthy(bt)
    assert bt.call(lambda: bt.broker.counters).get("malformed") == 1


def test_oversized_and_negative_frame_sizes_are_refused_before_reading_the_body(bt):
    for size in (64 * 1024 + 1, 2_000_000_000, -5):
        with socket.create_connection(("127.0.0.1", bt.port)) as sock:
            sock.sendall(struct.pack(">i", size) + b"\x00\x03")
            assert closed_by_broker(sock), size
    _healthy(bt)


def test_unknown_api_key_is_closed(bt):
    with socket.create_connection(("127.0.0.1", bt.port)) as sock:
        sock.sendall(_frame(_header(4242, 0)))
        assert closed_by_broker(sock)
    _healthy(bt)


def test_api_versions_newer_than_v4_gets_unsupported_version_as_v0_listing_only_api_versions(bt):
    # Kafka's ApiVersionsRequest.getErrorResponse: the client learns ApiVersions' range, nothing else.
    with socket.create_connection(("127.0.0.1", bt.port)) as sock:
        sock.sendall(_frame(_header(18, 9, corr=77) + b"\x00\x00\x00"))
        sock.settimeout(5)
        data = sock.recv(65536)
    corr, response = wire.decode_response(data[4:], 18, 0)
    assert isinstance(response, ApiVersionsV0) and corr == 77 and response.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(18, 0, 4)]


@pytest.mark.parametrize(("api_key", "version"), [(1, 3), (1, 19), (3, 14), (2, 0), (0, 14), (0, 2), (0, 1)])
def test_a_request_in_a_version_kafka_does_not_serve_closes_the_connection_as_kafka_does(bt, api_key, version):
    # Kafka 4.3.1 closes these (Produce v0-v2 included, though ApiVersions advertises them); others are served.
    with socket.create_connection(("127.0.0.1", bt.port)) as sock:
        sock.sendall(_frame(_header(api_key, version) + b"\x00" * 20))
        assert closed_by_broker(sock)
    _healthy(bt)


def test_a_peer_stalled_in_the_middle_of_a_frame_is_closed_while_others_are_served(bt):
    with socket.create_connection(("127.0.0.1", bt.port)) as stalled:
        stalled.sendall(struct.pack(">i", 100) + b"\x00\x12\x00\x03")  # 4 of 100 bytes, then nothing
        _healthy(bt)  # served while the stalled peer holds its half frame
        started = time.monotonic()
        assert closed_by_broker(stalled, timeout=10)
        assert time.monotonic() - started < 10


def test_connections_beyond_the_limit_are_refused_and_the_others_keep_working(start_broker):
    bt = start_broker(topics={"healthy": 1}, max_connections=8, max_connections_per_ip=8)
    clients = [RawClient("127.0.0.1", bt.port) for _ in range(8)]
    try:
        for c in clients:  # all 8 are registered once each has been answered
            c.call(metadata_request(12, ["healthy"]))
        extra = [socket.create_connection(("127.0.0.1", bt.port)) for _ in range(5)]
        try:
            assert all(closed_by_broker(s) for s in extra)
        finally:
            for s in extra:
                s.close()
        for c in clients:
            assert c.call(fetch_request(12, [("healthy", 0, 0, 1000)])).error_code == 0
    finally:
        for c in clients:
            c.close()
    deadline = time.monotonic() + 5
    while bt.call(lambda: len(bt.broker.connections)) and time.monotonic() < deadline:
        time.sleep(0.05)
    _healthy(bt)  # room again once they have gone
    assert bt.call(lambda: bt.broker.counters)["refused_connections"] == 5


def test_dropping_a_client_connection_leaves_the_others_alone(bt):
    with RawClient("127.0.0.1", bt.port) as victim, RawClient("127.0.0.1", bt.port) as bystander:
        victim.call(metadata_request(12, ["healthy"]))
        bystander.call(metadata_request(12, ["healthy"]))
        address = "127.0.0.1:%d" % victim.sock.getsockname()[1]
        assert bt.call(bt.broker.drop_connection, address) == 1
        with pytest.raises(ConnectionError):
            victim.call(metadata_request(12, ["healthy"]))
        assert bystander.call(metadata_request(12, ["healthy"])).topics[0].error_code == 0
