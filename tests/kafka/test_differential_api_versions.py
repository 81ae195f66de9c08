"""ApiVersions against Apache Kafka 4.3.1: fetchtool broker advertises Kafka's range for every api it implements,
answers an ApiVersions newer than it knows as Kafka does, and closes a connection on a version Kafka does not serve."""

from __future__ import annotations

import socket
import struct

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from fetchtool.broker import wire
from fetchtool.broker.background import BrokerThread
from fetchtool.broker.rawclient import RawClient
from fetchtool.broker.state import BrokerConfig

pytestmark = pytest.mark.kafka

KAFKA = {"nodes": 1, "cache_slots": 16}


@pytest.fixture(scope="module")
def ports(kafka):
    with BrokerThread(BrokerConfig(host="127.0.0.1", port=0)) as bt:
        yield {"kafka": kafka.nodes[0].port, "fetchtool": bt.port}


def ranges(port: int) -> dict[int, tuple[int, int]]:
    with RawClient("127.0.0.1", port) as client:
        response = client.call(ApiVersionsRequest(client_software_name="fetchtool", client_software_version="0"))
    assert response.error_code == 0
    return {int(k.api_key): (k.min_version, k.max_version) for k in response.api_keys}


def raw_answer(port: int, api_key: int, version: int, tagged: bool) -> bytes | None:
    """The first response frame to a bare request header (plus zero bytes), or None if the broker closed."""
    header = struct.pack(">hhih", api_key, version, 77, 1) + b"x" + (b"\x00" if tagged else b"") + b"\x00" * 16
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(header)) + header)
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            return None
    return data or None


def test_every_api_fetchtool_advertises_has_kafkas_version_range(ports):
    theirs, ours = ranges(ports["kafka"]), ranges(ports["fetchtool"])
    assert {key: theirs.get(key) for key in ours} == ours
    assert len(theirs) > len(ours)   # Kafka has many apis fetchtool broker does not implement (admin, groups, ...)


def test_an_api_versions_request_newer_than_v4_gets_the_same_v0_error_answer(ports):
    answers = {name: raw_answer(port, 18, 9, tagged=True) for name, port in ports.items()}
    decoded = {name: wire.decode_response(frame[4:], 18, 0) for name, frame in answers.items()}
    assert decoded["fetchtool"] == decoded["kafka"]
    assert int(decoded["kafka"][1].error_code) == 35


@pytest.mark.parametrize(("api_key", "version", "tagged"),
                         [(1, 3, False), (1, 19, True), (3, 14, True), (2, 0, False), (0, 2, False), (0, 14, True)])
def test_a_version_kafka_does_not_serve_closes_the_connection_on_both(ports, api_key, version, tagged):
    assert {name: raw_answer(port, api_key, version, tagged) for name, port in ports.items()} == {
        "kafka": None, "fetchtool": None}
