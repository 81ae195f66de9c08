"""`fetchtool broker` as a separate process: ready line, SIGUSR1 / admin-port fault injection, clean stop."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
from broker_scenarios import fetch_request

from fetchtool.broker.rawclient import RawClient


def _admin(port: int, command: str) -> dict:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(command.encode() + b"\n")
        return json.loads(s.makefile().readline())


@pytest.fixture
def broker_process(free_port):
    admin_port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "fetchtool.cli", "broker", "--port", "0", "--topic", "cli:2",
         "--admin-port", str(admin_port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        line = proc.stdout.readline().strip()
        yield proc, line, admin_port
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def test_broker_process_drops_sessions_on_sigusr1_and_stops_cleanly_on_sigterm(broker_process):
    proc, ready, admin_port = broker_process
    match = re.fullmatch(r"listening on 127\.0\.0\.1:(\d+)", ready)
    assert match, ready
    port = int(match.group(1))
    with RawClient("127.0.0.1", port) as client:
        full = client.call(fetch_request(12, [("cli", 0, 0, 1000), ("cli", 1, 0, 1000)], epoch=0))
        assert full.session_id != 0
        deadline = time.monotonic() + 5
        while not _admin(admin_port, "sessions")["sessions"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [s["session_id"] for s in _admin(admin_port, "sessions")["sessions"]] == [full.session_id]

        proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 5
        while _admin(admin_port, "sessions")["sessions"] and time.monotonic() < deadline:
            time.sleep(0.05)
        gone = client.call(fetch_request(12, [], session_id=full.session_id, epoch=1))
        assert (gone.error_code, gone.session_id) == (70, 0)
    history = _admin(admin_port, "history 5")["history"]
    assert [h["error_code"] for h in history] == [0, 70]
    assert _admin(admin_port, "bogus")["error"].startswith("unknown command")

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0
    err = proc.stderr.read()
    assert "fetch session created" in err and "dropped all 1 fetch sessions" in err
    assert "fetch session error 70 FETCH_SESSION_ID_NOT_FOUND" in err
    assert "Traceback" not in err


def test_bad_topic_spec_is_a_one_line_usage_error():
    proc = subprocess.run([sys.executable, "-m", "fetchtool.cli", "broker", "--topic", "nopartitions"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert "NAME:PARTITIONS" in proc.stderr and "Traceback" not in proc.stderr
