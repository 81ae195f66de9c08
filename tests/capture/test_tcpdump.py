"""A real capture: tcpdump on loopback records two Python sockets exchanging data; the capture layer must give
back exactly the bytes the sockets sent. Skipped cleanly when tcpdump is missing or not permitted."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from fetchtool.capture.events import StreamData, StreamGap

from .conftest import read_capture

TCPDUMP = shutil.which("tcpdump")


def start_tcpdump(path, interface: str, port: int, extra: list[str]) -> subprocess.Popen:
    proc = subprocess.Popen(
        [TCPDUMP, "-i", interface, "--immediate-mode", "-B", "32768", "-U", "-n", "-s", "0", "-w", str(path), *extra, f"tcp port {port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.skip(f"tcpdump cannot capture here: {proc.stderr.read().strip()[:200]}")
        if os.path.exists(path) and os.path.getsize(path) > 0:  # the file header is written once listening
            time.sleep(0.3)
            return proc
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    pytest.skip("tcpdump did not start listening within 10 s")


def exchange(port_holder: socket.socket, request: bytes, response: bytes) -> tuple[int, int]:
    """Client sends `request`, server answers `response`, both close. Returns (client port, server port)."""
    server_port = port_holder.getsockname()[1]

    def serve():
        conn, _ = port_holder.accept()
        with conn:
            got = b""
            while len(got) < len(request):
                got += conn.recv(1 << 16)
            conn.sendall(response)
            conn.shutdown(socket.SHUT_WR)
            while conn.recv(1 << 16):
                pass

    t = threading.Thread(target=serve)
    t.start()
    with socket.create_connection(("127.0.0.1", server_port)) as client:
        client_port = client.getsockname()[1]
        client.sendall(request)
        got = b""
        while len(got) < len(response):
            chunk = client.recv(1 << 16)
            if not chunk:
                break
            got += chunk
        client.shutdown(socket.SHUT_WR)
        assert got == response
    t.join(10)
    return client_port, server_port


@pytest.mark.skipif(TCPDUMP is None, reason="tcpdump is not installed")
@pytest.mark.parametrize("interface, extra", [
    ("lo", []),
    ("any", ["--time-stamp-precision=nano"]),  # Linux cooked v2 link type, nanosecond pcap
])
def test_tcpdump_capture_of_a_socket_exchange_reassembles_to_the_sent_bytes(tmp_path, payloads, interface,
                                                                            extra):
    request, response = payloads(150_000, 1), payloads(700_000, 2)
    path = tmp_path / "lo.pcap"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    proc = start_tcpdump(path, interface, listener.getsockname()[1], extra)
    try:
        client_port, server_port = exchange(listener, request, response)
        time.sleep(0.5)
    finally:
        listener.close()
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    cap = read_capture(path)
    sent = {client_port: request, server_port: response}
    # Rebuild each direction from the events: data where captured, placeholders where a gap was declared.
    rebuilt = {client_port: bytearray(), server_port: bytearray()}
    lost = dict.fromkeys(rebuilt, 0)
    for ev in cap.events:
        if isinstance(ev, StreamData):
            rebuilt[ev.src.port] += ev.data
        elif isinstance(ev, StreamGap):
            rebuilt[ev.src.port] += sent[ev.src.port][len(rebuilt[ev.src.port]):][:ev.lost_bytes]
            lost[ev.src.port] += ev.lost_bytes
    assert {port: bytes(data) for port, data in rebuilt.items()} == sent
    if re.search(r"^0 packets dropped by kernel", err, re.M):
        assert lost == {client_port: 0, server_port: 0}
        assert [c.reason for c in cap.closed] == ["fin"]
    else:  # the kernel dropped packets under load: the ACKs must have exposed exactly those bytes as gaps
        assert sum(lost.values()) > 0, err
    assert cap.stats.tcp_segments == cap.stats.packets
    frames = [s.frame for s in cap.segments]
    assert frames == list(range(1, len(frames) + 1))
    assert cap.segments[0].flags & 0x02  # starts with the SYN
