"""`fetchtool broker` as a separate process: ready line, SIGUSR1 / admin-port fault injection, clean stop.

On a support engineer's command line: a bad option value exits 2 before anything listens, a socket that
cannot be bound exits 1 naming its address; either way one "error: " line on stderr, never a traceback.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import struct
import subprocess
import sys
import time

import pytest
from broker_scenarios import fetch_request
from typer.testing import CliRunner

from fetchtool.cli import app

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


def _broker_process(*args: str) -> subprocess.CompletedProcess:
    """A broker that is expected not to start: it must exit on its own (the timeout fails a broker that serves)."""
    return subprocess.run([sys.executable, "-m", "fetchtool.cli", "broker", *args],
                          capture_output=True, text=True, timeout=30)


def _error_line(stderr: str) -> str:
    """The one 'error: ' line of stderr (log lines may precede it), and no traceback anywhere."""
    assert "Traceback" not in stderr and "Task was destroyed" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, stderr
    return errors[0]


# A host no interface here has (TEST-NET-1): were the bad value accepted, the broker would fail to listen with
# exit 1 instead of serving forever, so a missing check fails the test instead of hanging it.
UNBINDABLE = ["--host", "192.0.2.1"]


@pytest.mark.parametrize(("option", "value"), [
    ("--port", "-1"), ("--port", "70000"), ("--admin-port", "70000"), ("--admin-port", "-1"),
    ("--cache-slots", "-1"), ("--cache-shards", "0"), ("--cache-shards", "1025"), ("--eviction-ms", "-1"),
    ("--max-frame-bytes", "0"), ("--max-frame-bytes", "1023"), ("--max-connections", "0"),
    ("--max-connections-per-ip", "0"),
    ("--idle-timeout-ms", "0"), ("--frame-timeout-ms", "-5"), ("--auto-create-partitions", "-1"),
    ("--auto-create-partitions", "100001"), ("--topic", "huge:100001"),
])
def test_a_bad_option_value_is_refused_in_one_line_before_the_broker_listens(option, value):
    res = CliRunner().invoke(app, ["broker", *UNBINDABLE, "--port", "0", option, value])
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    assert isinstance(res.exception, SystemExit)
    assert res.stderr.splitlines() == [_error_line(res.stderr)]  # nothing logged: no broker was started
    assert option in res.stderr and value.split(":")[-1] in res.stderr
    assert res.stdout == ""


def test_the_same_topic_twice_is_refused_rather_than_silently_keeping_the_last():
    res = CliRunner().invoke(app, ["broker", *UNBINDABLE, "--topic", "orders:3", "--topic", "orders:1"])
    assert res.exit_code == 2
    assert _error_line(res.stderr) == "error: --topic orders given twice"


def test_an_admin_port_in_use_names_that_port_and_stops_the_broker_that_already_listens():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _broker_process("--port", "0", "--admin-port", str(port))
    assert proc.returncode == 1
    line = _error_line(proc.stderr)
    assert line.startswith(f"error: cannot listen on 127.0.0.1:{port} (--admin-port): "), line
    assert "in use" in line
    assert "broker stopped" in proc.stderr  # the broker port was closed before exiting
    assert "listening on" not in proc.stdout  # a client script waiting for the ready line is not misled


def test_a_broker_port_in_use_names_that_port():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _broker_process("--port", str(port))
    assert proc.returncode == 1
    line = _error_line(proc.stderr)
    assert line.startswith(f"error: cannot listen on 127.0.0.1:{port} (--host/--port): "), line
    assert proc.stdout == ""


@pytest.mark.parametrize("host", ["192.0.2.1", "no-such-host.invalid", "a..b"])
def test_a_host_that_cannot_be_listened_on_is_one_line(host):
    proc = _broker_process("--host", host, "--port", "0")
    assert proc.returncode == 1
    assert _error_line(proc.stderr).startswith(f"error: cannot listen on {host}:0 (--host/--port): ")
    assert proc.stdout == ""


def test_fewer_cache_slots_than_shards_warns_that_no_session_can_be_created():
    proc = _broker_process(*UNBINDABLE, "--port", "0", "--cache-slots", "4")
    assert "warning: --cache-slots 4 over 8 shards leaves 0 slots per shard" in proc.stderr
    assert proc.returncode == 1 and _error_line(proc.stderr)


@pytest.fixture
def broker_command():
    """broker_command(*options) -> (process, bound port) of `fetchtool broker --port 0 ...`, stopped after the test."""
    started: list[subprocess.Popen] = []

    def start(*options: str) -> tuple[subprocess.Popen, int]:
        proc = subprocess.Popen([sys.executable, "-m", "fetchtool.cli", "broker", "--port", "0", *options],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started.append(proc)
        ready = proc.stdout.readline().strip()
        match = re.fullmatch(r"listening on .*:(\d+)", ready)
        assert match, (ready, proc.stderr.read() if proc.poll() is not None else "")
        return proc, int(match.group(1))

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def _kafka_python_round_trip(bootstrap: str, topic: str) -> tuple[set[str], list[bytes], int]:
    """A real kafka-python producer, consumer (manual assignment, offsets committed to the group coordinator) and
    admin client against one broker: (broker hosts Metadata advertised, values read back, committed offset)."""
    kafka = pytest.importorskip("kafka")
    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        hosts = {b["host"] for b in admin.describe_cluster()["brokers"]}
    finally:
        admin.close()
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=10_000, max_block_ms=10_000)
    try:
        for i in range(5):
            producer.send(topic, value=f"v{i}".encode(), partition=0)
        producer.flush(10)
    finally:
        producer.close(5)
    tp = kafka.TopicPartition(topic, 0)
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id="advertised", enable_auto_commit=False,
                                   auto_offset_reset="earliest", fetch_max_wait_ms=100, request_timeout_ms=10_000)
    got: list[bytes] = []
    try:
        consumer.assign([tp])
        deadline = time.monotonic() + 15
        while len(got) < 5 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(r.value for r in records)
        consumer.commit()  # FindCoordinator, then OffsetCommit on the coordinator it names
        committed = consumer.committed(tp)
    finally:
        consumer.close()
    return hosts, got, committed


def test_a_broker_bound_to_every_interface_advertises_an_address_clients_can_connect_to(broker_command):
    # The one test that binds 0.0.0.0: that is the case under test. The client still connects via 127.0.0.1.
    proc, port = broker_command("--host", "0.0.0.0", "--topic", "wild:1")
    hosts, got, committed = _kafka_python_round_trip(f"127.0.0.1:{port}", "wild")
    assert hosts == {"127.0.0.1"}  # not 0.0.0.0, which Kafka itself refuses to advertise
    assert got == [f"v{i}".encode() for i in range(5)] and committed == 5
    proc.terminate()
    assert proc.wait(10) == 0
    err = proc.stderr.read()
    assert f"advertising 127.0.0.1:{port} to clients" in err and "Traceback" not in err


def test_advertised_host_is_what_metadata_and_find_coordinator_send_clients_to(broker_command):
    _proc, port = broker_command("--host", "127.0.0.1", "--advertised-host", "localhost", "--topic", "named:1")
    hosts, got, committed = _kafka_python_round_trip(f"127.0.0.1:{port}", "named")
    assert hosts == {"localhost"}
    assert len(got) == 5 and committed == 5


@pytest.mark.parametrize("value", ["0.0.0.0", "::", "[::]", ""])
def test_a_wildcard_advertised_host_is_refused_as_kafka_does(value):
    proc = _broker_process(*UNBINDABLE, "--advertised-host", value)
    assert proc.returncode == 2
    assert "--advertised-host" in _error_line(proc.stderr) and repr(value) in proc.stderr


def test_a_client_closed_for_breaking_the_protocol_is_logged_without_verbose(broker_command):
    proc, port = broker_command("--topic", "t:1")
    socket.create_connection(("127.0.0.1", port), timeout=5).close()  # a routine close: not worth a line
    with socket.create_connection(("127.0.0.1", port), timeout=5) as rude:
        rude.sendall(struct.pack(">ihhi", 10, 999, 0, 7) + b"\x00\x00")  # API key 999: no such API
        assert rude.recv(100) == b""                           # the broker hung up on it
    with socket.create_connection(("127.0.0.1", port), timeout=5) as huge:
        huge.sendall(struct.pack(">i", 2**31 - 1))             # a size no frame may have
        assert huge.recv(100) == b""
    with RawClient("127.0.0.1", port) as client:               # and it still serves everyone else
        assert client.call(fetch_request(12, [("t", 0, 0, 1000)], epoch=0)).error_code == 0
    proc.terminate()
    assert proc.wait(10) == 0
    closed = [line for line in proc.stderr.read().splitlines() if " closed: " in line]
    assert len(closed) == 2, closed
    assert "999" in closed[0] and str(2**31 - 1) in closed[1]


def test_a_request_claiming_billions_of_topics_is_refused_and_the_broker_serves_on(broker_command):
    # Fetch v12 (flexible): replica -1, max wait, min bytes, max bytes, isolation, session id, epoch, then a
    # compact topics array whose count claims 2**32 - 2 entries in a frame of a few bytes. Reading it with kio's
    # native reader as it is would reserve memory for them all, and Rust aborts the process on that.
    body = struct.pack(">iiiibii", -1, 500, 1, 1 << 20, 0, 0, -1) + b"\xff\xff\xff\xff\x0f" + b"\x00" * 4
    header = struct.pack(">hhih", 1, 12, 9, 3) + b"bad" + b"\x00"  # request header v2: no tagged fields
    proc, port = broker_command("--topic", "t:1")
    with socket.create_connection(("127.0.0.1", port), timeout=5) as bad:
        bad.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        assert bad.recv(100) == b""                            # the broker hung up on this client only
    with RawClient("127.0.0.1", port) as client:
        assert client.call(fetch_request(12, [("t", 0, 0, 1000)], epoch=0)).error_code == 0
    assert proc.poll() is None, proc.stderr.read()
    proc.terminate()
    assert proc.wait(10) == 0
    assert "entries in" in proc.stderr.read()
