"""Connection limits as Kafka has them: max.connections.per.ip keeps one address from taking every slot,
connections.max.idle.ms closes idle connections, and a request frame must be complete within a bound of its first
byte, so a slowloris cannot hold a slot however slowly it trickles. Each close or refusal is one log line, counted."""

from __future__ import annotations

import logging
import socket
import struct
import time

import pytest
from broker_scenarios import closed_by_broker, fetch_request, metadata_request

from fetchtool.broker.rawclient import RawClient

OTHER_ADDRESS = "127.0.0.2"  # Linux routes all of 127/8 on lo: a second client address on this machine


def _served_from(address: str, port: int) -> float:
    """Seconds a client connecting from `address` takes to connect and get a Metadata and a Fetch answered."""
    started = time.perf_counter()
    with RawClient("127.0.0.1", port, source_address=address) as client:
        assert client.call(metadata_request(12, ["t"])).topics[0].error_code == 0
        assert client.call(fetch_request(12, [("t", 0, 0, 1000)])).error_code == 0
    return time.perf_counter() - started


def _wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.fixture
def log(caplog):
    caplog.set_level(logging.INFO, logger="fetchtool.broker")
    return caplog


def test_a_thousand_slow_connections_from_one_address_do_not_lock_out_another_client(start_broker, log):
    bt = start_broker(topics={"t": 1})   # defaults: 1,000 connections, 500 per address
    baseline = _served_from(OTHER_ADDRESS, bt.port)
    slow = []
    try:
        for _ in range(1000):
            s = socket.create_connection(("127.0.0.1", bt.port), timeout=10)
            s.sendall(b"\x00")   # the first byte of a frame that never completes
            slow.append(s)
        _wait_for(lambda: bt.call(lambda: bt.broker.counters.get("refused_connections_per_ip", 0)) >= 500)
        took = _served_from(OTHER_ADDRESS, bt.port)
        print(f"\nclient from {OTHER_ADDRESS} served in {took * 1000:.0f} ms beside 1,000 slow connections "
              f"({baseline * 1000:.0f} ms before they came)")
        assert took < 1.0
        counters = bt.call(lambda: bt.broker.counters)
        assert counters["refused_connections_per_ip"] == 500
        assert bt.call(lambda: bt.broker.connections_per_ip["127.0.0.1"]) == 500
    finally:
        for s in slow:
            s.close()
    refusals = [r.getMessage() for r in log.records if "max.connections.per.ip" in r.getMessage()]
    assert len(refusals) == 500 and "connections already open from 127.0.0.1" in refusals[0]


def test_a_slowloris_trickling_bytes_is_closed_when_its_frame_is_not_complete_in_time(start_broker, log):
    bt = start_broker(topics={"t": 1}, partial_frame_timeout_ms=600)
    with socket.create_connection(("127.0.0.1", bt.port), timeout=10) as sock:
        frame = struct.pack(">i", 200) + b"\x00" * 200
        started = time.monotonic()
        closed = False
        for byte in frame:   # one byte every 100 ms: the connection is never quiet for long
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            if closed_by_broker(sock, 0.1):
                closed = True
                break
        took = time.monotonic() - started
    assert closed and 0.5 < took < 3.0, took
    _served_from("127.0.0.1", bt.port)
    assert bt.call(lambda: bt.broker.counters)["incomplete_frame_timeout"] == 1
    lines = [r for r in log.records if "not completed within 600 ms" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.WARNING
    assert "bytes received" in lines[0].getMessage()


def test_an_idle_connection_is_closed_after_connections_max_idle_ms(start_broker, log):
    bt = start_broker(topics={"t": 1}, idle_timeout_ms=300)
    with RawClient("127.0.0.1", bt.port) as idle:
        idle.call(metadata_request(12, ["t"]))
        started = time.monotonic()
        assert closed_by_broker(idle.sock, 5)
        assert 0.25 < time.monotonic() - started < 3
    assert bt.call(lambda: bt.broker.counters)["idle_timeout"] == 1
    lines = [r.getMessage() for r in log.records if "idle for 300 ms (connections.max.idle.ms)" in r.getMessage()]
    assert len(lines) == 1


def test_a_connection_that_keeps_asking_is_never_idle(start_broker):
    bt = start_broker(topics={"t": 1}, idle_timeout_ms=300, partial_frame_timeout_ms=300)
    with RawClient("127.0.0.1", bt.port) as busy:
        for _ in range(8):   # 1.6 s in all, more than both limits, never 300 ms quiet
            assert busy.call(fetch_request(12, [("t", 0, 0, 1000)])).error_code == 0
            time.sleep(0.2)
    assert "idle_timeout" not in bt.call(lambda: bt.broker.counters)


def test_the_per_address_limit_frees_a_slot_when_a_connection_closes(start_broker):
    bt = start_broker(topics={"t": 1}, max_connections_per_ip=2)
    first, second = RawClient("127.0.0.1", bt.port), RawClient("127.0.0.1", bt.port)
    try:
        first.call(metadata_request(12, ["t"]))
        second.call(metadata_request(12, ["t"]))
        with socket.create_connection(("127.0.0.1", bt.port), timeout=5) as third:
            assert closed_by_broker(third, 5)
        first.close()
        _wait_for(lambda: bt.call(lambda: bt.broker.connections_per_ip["127.0.0.1"]) < 2)
        assert _served_from("127.0.0.1", bt.port) < 5
    finally:
        first.close()
        second.close()
