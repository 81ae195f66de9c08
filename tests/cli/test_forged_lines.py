"""A client id with a line break in it cannot forge a line of a human report (a row, a finding, a session
heading): every report shows it escaped (`\\x0a`), where the JSON keeps it as sent."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hostile_capture import write_hostile_capture

FIRST = "consumer-1\n│ forged │ row"
SECOND = "c2\r\nforged line"
HUMAN = {"analyze": ["table", "markdown"], "sessions": ["table", "markdown"], "savings": ["table", "markdown"],
         "simulate": ["table", "markdown"], "replay": ["table", "markdown"], "decode": ["table"]}
EXTRA = {"replay": ["--as-fast-as-possible"]}


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    return write_hostile_capture(tmp_path_factory.mktemp("ids") / "line-breaks.pcap", FIRST, SECOND)


def run(command: str, fmt: str, capture) -> str:
    got = subprocess.run([sys.executable, "-m", "fetchtool", command, str(capture), "--format", fmt,
                          *EXTRA.get(command, [])], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "COLUMNS": "120"})
    assert got.returncode == 0, got.stderr
    return got.stdout + got.stderr


@pytest.mark.parametrize("command,fmt", [(c, f) for c, formats in HUMAN.items() for f in formats])
def test_a_line_break_in_a_client_id_starts_no_line_of_the_report(capture, command, fmt):
    text = run(command, fmt, capture)
    assert "consumer-1\\x0a" in text or "c2\\x0d\\x0a" in text  # the clients are shown, escaped
    for line in text.splitlines():
        assert not line.strip(" │|-").startswith(("forged", "│ forged")), line


def test_the_json_report_keeps_the_client_ids_as_sent(capture):
    got = subprocess.run([sys.executable, "-m", "fetchtool", "analyze", str(capture), "--format", "json"],
                         capture_output=True, text=True, timeout=120)
    doc = json.loads(got.stdout)
    assert {c["client_id"] for c in doc["clients"]} == {FIRST, SECOND}
