"""simulate and replay on a support engineer's command line: wrong options, unusable files, reports piped to files.

A bad option value exits 2, input that cannot be used exits 1; either way one line on stderr starting "error: ",
never a traceback. What could be read is still reported, its problems as "warning: " lines.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fetchtool.cli import app
from fetchtool.decoder import decode_capture
from fetchtool.exchange import Exchange

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
THRASH = str(CAPTURES / "scenarios" / "eviction-thrash.pcap")  # five session clients, two evicted (error 70)


def _invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def _one_line(text: str, prefix: str) -> str:
    lines = text.splitlines()
    assert len(lines) == 1 and lines[0].startswith(prefix), text
    return lines[0]


def _refused(res, option: str) -> str:
    """A bad option value: exit 2, one 'error:' line naming the option, no traceback."""
    assert res.exit_code == 2, (res.exit_code, res.output)
    assert isinstance(res.exception, SystemExit) and "Traceback" not in res.output
    line = _one_line(res.stderr, "error: ")
    assert option in line
    return line


@pytest.mark.parametrize("broker", ["127.0.0.1:99999", "127.0.0.1:0", ":9092", "localhost", "localhost:kafka"])
def test_a_broker_address_out_of_range_or_malformed_is_refused_before_anything_connects(broker):
    line = _refused(_invoke("replay", THRASH, "--broker", broker, "--as-fast-as-possible"), "--broker")
    assert repr(broker) in line


@pytest.mark.parametrize("timeout", ["0", "-1", "nan", "inf"])
def test_a_response_timeout_must_be_a_finite_number_of_seconds_above_zero(timeout):
    _refused(_invoke("replay", THRASH, "--timeout", timeout, "--as-fast-as-possible"), "--timeout")


@pytest.mark.parametrize("speed", ["nan", "inf", "0", "-2"])
def test_a_replay_speed_must_be_finite_and_positive(speed):
    _refused(_invoke("replay", THRASH, "--speed", speed, "--dry-run"), "--speed")


@pytest.mark.parametrize("option, value", [("--cache-slots", "-1"), ("--cache-shards", "0"),
                                           ("--eviction-ms", "-5")])
def test_each_bad_cache_setting_of_the_embedded_broker_is_named_with_its_value(option, value):
    line = _refused(_invoke("replay", THRASH, option, value), option)
    assert line.endswith(f"got {value}")
    assert not ({"--cache-slots", "--cache-shards", "--eviction-ms"} - {option}) & set(line.split())


@pytest.mark.parametrize("value", ["1,,2", "1000,", ",1000"])
def test_simulate_refuses_an_empty_item_in_a_list_of_values_instead_of_dropping_it(value):
    line = _refused(_invoke("simulate", THRASH, "--cache-slots", value), "--cache-slots")
    assert line == f"error: --cache-slots: empty value in {value!r}"


def test_simulate_refuses_a_value_that_is_not_an_integer_or_below_the_minimum_as_a_bad_option():
    _refused(_invoke("simulate", THRASH, "--cache-slots", "lots"), "--cache-slots")
    _refused(_invoke("simulate", THRASH, "--cache-shards", "4,0"), "--cache-shards")


def test_fewer_slots_than_shards_is_simulated_as_kafka_does_and_said_once_per_setting():
    # The thrash capture came from a 3-slot broker with one shard. Kafka 3.8+ gives each of 8 shards 3 // 8 = 0
    # slots: no session at all. That is simulated faithfully, with a warning saying why, once per setting.
    res = _invoke("simulate", THRASH, "--cache-slots", "3,3,100", "--cache-shards", "8,1", "-f", "json")
    assert res.exit_code == 0, res.output
    warnings = res.stderr.splitlines()
    assert warnings == ["warning: --cache-slots 3 over 8 shards leaves 0 slots per shard: no incremental fetch "
                        "session will be created (as in Kafka 3.8+; --cache-shards 1 models a broker before 3.8)"]
    created = {(c["cache_slots"], c["cache_shards"]): c["totals"]["sessions_created"]
               for c in json.loads(res.stdout)["configs"]}
    assert created[(3, 8)] == 0 and created[(3, 1)] == 5 and created[(100, 8)] == 5
    # replay says it for its embedded broker before anything runs; a real broker's cache is not ours to judge
    assert "leaves 0 slots per shard" in _invoke("replay", THRASH, "--cache-slots", "3", "--dry-run").stderr
    assert _invoke("replay", THRASH, "--cache-slots", "3", "--cache-shards", "1", "--dry-run").stderr == ""


@pytest.mark.parametrize("command", ["simulate", "replay"])
def test_short_f_selects_the_format_and_a_bad_format_is_a_bad_option(command):
    extra = ["--as-fast-as-possible"] if command == "replay" else []
    res = _invoke(command, THRASH, "-f", "json", *extra)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert "captured" in doc
    _refused(_invoke(command, THRASH, "-f", "xml", *extra), "--format")


@pytest.mark.parametrize("command", ["simulate", "replay"])
def test_a_directory_is_called_a_directory(command, tmp_path):
    res = _invoke(command, str(tmp_path))
    assert res.exit_code == 1 and isinstance(res.exception, SystemExit), res.output
    assert _one_line(res.stderr, "error: ") == f"error: {tmp_path}: is a directory, not a capture file"


@pytest.mark.parametrize("command", ["simulate", "replay"])
def test_a_single_missing_file_is_one_line_exit_1(command, tmp_path):
    missing = tmp_path / "nope.pcap"
    res = _invoke(command, str(missing))
    assert res.exit_code == 1 and isinstance(res.exception, SystemExit), res.output
    line = _one_line(res.stderr, "error: ")
    assert str(missing) in line and "no such file" in line.lower()


@pytest.mark.parametrize("command", ["simulate", "replay"])
def test_a_missing_file_next_to_a_readable_one_is_a_warning_and_the_readable_one_is_reported(command, tmp_path):
    missing = tmp_path / "nope.pcap"
    extra = ["--as-fast-as-possible"] if command == "replay" else []
    alone = _invoke(command, THRASH, "-f", "json", *extra)
    both = _invoke(command, THRASH, str(missing), "-f", "json", *extra)
    assert both.exit_code == 0, both.output
    line = _one_line(both.stderr, "warning: ")
    assert "unreadable_file" in line and str(missing) in line
    # the report is the readable file's, as if it had been given alone
    assert json.loads(both.stdout)["captured"] == json.loads(alone.stdout)["captured"]


class _SilentBroker:
    """Accepts connections on a free loopback port and never answers: a broker that hangs."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.05)  # a blocked accept() would not notice stop()
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                self.conns.append(self.sock.accept()[0])
            except TimeoutError:
                pass

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(5)
        self.sock.close()
        for c in self.conns:
            c.close()


def test_a_broker_that_never_answers_is_one_line_that_says_it_timed_out():
    # ApiVersions is the first thing replay asks a --broker (which Fetch versions it speaks)
    silent = _SilentBroker()
    try:
        res = _invoke("replay", THRASH, "--broker", f"127.0.0.1:{silent.port}", "--timeout", "0.2")
    finally:
        silent.stop()
    assert res.exit_code == 1 and isinstance(res.exception, SystemExit), res.output
    line = _one_line(res.stderr, "error: ")
    assert line == f"error: 127.0.0.1:{silent.port} did not answer ApiVersions: timed out"


def test_clients_that_got_no_answer_in_time_show_a_reason_and_no_rtt_not_none():
    # A microsecond is shorter than any loopback round trip to the embedded broker: no client gets a response
    # (or even a connection) in time, so no rtt is ever measured.
    res = _invoke("replay", THRASH, "--as-fast-as-possible", "--timeout", "0.000001")
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "None" not in out
    ids = _client_ids(THRASH)
    rows = [ln for ln in out.splitlines() if ln.startswith("│") and any(f"({cid})" in ln for cid in ids)]
    assert len(rows) == len(ids)
    for row in rows:
        assert row.split("│")[-2].strip() == "-/-", row
    totals = next(ln for ln in out.splitlines() if ln.startswith("│ replay "))
    assert [c.strip() for c in totals.split("│")[-3:-1]] == ["-", "-"]
    stopped = [ln for ln in out.splitlines() if "stopped early: " in ln]
    for note in stopped:
        assert note.split(": ")[-1].strip(), note  # a reason after the last colon, never an empty one
    assert stopped or "got no response within" in out
    doc = json.loads(_invoke("replay", THRASH, "--as-fast-as-possible", "--timeout", "0.000001", "-f", "json").stdout)
    assert {c["rtt_ms"]["p50"] for c in doc["clients"]} == {None}  # JSON keeps null
    assert all(c["problem"] is None or not c["problem"].endswith(": ") for c in doc["clients"])


def _client_ids(capture: str) -> list[str]:
    return sorted({x.client_id for x in decode_capture([capture]) if isinstance(x, Exchange) and x.client_id})


def _clients(capture: str) -> set[str]:
    return {x.client for x in decode_capture([capture]) if isinstance(x, Exchange)}


@pytest.mark.parametrize("command", [["replay", "--as-fast-as-possible"], ["simulate"]])
def test_a_table_piped_to_a_file_keeps_every_client_whole(command, tmp_path):
    out = tmp_path / "report.txt"
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    with out.open("w") as fh:
        subprocess.run([sys.executable, "-m", "fetchtool", command[0], THRASH, *command[1:]], stdout=fh,
                       stderr=subprocess.PIPE, check=True, env=env, timeout=60)
    text = out.read_text()
    assert "…" not in text
    clients = _clients(THRASH)
    ids = _client_ids(THRASH)
    assert clients and ids
    for client in clients:
        assert client in text
    for cid in ids:
        assert f"({cid})" in text
