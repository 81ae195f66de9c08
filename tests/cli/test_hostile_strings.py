"""A capture from a hostile network cannot drive the support engineer's terminal (issue #18, item 0).

Its client ids, client software name and version, topic names and rack ids carry `ESC ] 0 ; pwned BEL` (set the
window title), `ESC [ 5 m`, a C1 CSI, NUL, DEL, CR, backspace, a right-to-left override and a line separator
(tests/cli/hostile_capture.py: real wire bytes). Every command that reads a capture, in every format, piped and
with colour forced on, writes none of them raw: on stdout, on stderr, in an --output file; the only escape
sequences left are rich's own styling. The human reports show them escaped (`\\x1b]0;pwned\\x07`), so nothing
was dropped unseen, and the JSON reports still hold the original strings exactly. `fetchtool broker` logs a
hostile client id escaped too.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time

import pytest
from rich.cells import cell_len

from cli_runs import popen
from hostile_capture import CLIENT_ID, HOSTILE, SHOWN, SOFTWARE_NAME, write_hostile_capture

from fetchtool.protocol.messages import fetch_request

# Every C0 control but the newline, DEL, the C1 controls, and the bidi and line-breaking format characters.
UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028-\u202e\u2066-\u2069]")
SGR = re.compile(r"\x1b\[[0-9;]*m")  # what rich writes to colour and embolden
# What rich's progress bar writes on a terminal (replay): hide/show the cursor, go up a line, clear it, go home.
CURSOR = re.compile(r"\x1b\[\?25[lh]|\x1b\[[0-9]*A|\x1b\[2K|\r")
WIDTH = 80

RUNS = {  # command -> its formats (the first is the human table)
    "analyze": ["table", "json", "markdown", "html"],
    "sessions": ["table", "json", "markdown"],
    "savings": ["table", "json", "jsonl", "markdown"],
    "simulate": ["table", "json", "markdown"],
    "replay": ["table", "json", "markdown"],
    "decode": ["table", "jsonl"],
}
EXTRA = {"replay": ["--as-fast-as-possible"]}  # against fetchtool's own in-process broker
CASES = [(command, fmt) for command, formats in RUNS.items() for fmt in formats]


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    return write_hostile_capture(tmp_path_factory.mktemp("hostile") / "hostile.pcap")


def run(command: str, fmt: str, capture, *more, colour: bool = False) -> subprocess.CompletedProcess:
    """The command as a user runs it: piped (no colour), or with colour forced on as on a terminal."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR", "TERM")}
    env.update({"COLUMNS": str(WIDTH), "TERM": "xterm-256color"}, **({"FORCE_COLOR": "1"} if colour else {}))
    got = subprocess.run([sys.executable, "-m", "fetchtool", command, str(capture), "--format", fmt,
                          *EXTRA.get(command, []), *map(str, more)], capture_output=True, text=True, env=env,
                         timeout=120)
    assert got.returncode == 0, got.stderr
    return got


def raw_controls(text: str, allowed: re.Pattern | None = None) -> list[str]:
    """The unsafe characters left in `text` once the well-formed sequences `allowed` are taken out."""
    if allowed is not None:
        text = allowed.sub("", text)
    return sorted({f"U+{ord(c):04X}" for c in UNSAFE.findall(text)})


def strings(doc) -> set[str]:
    if isinstance(doc, str):
        return {doc}
    if isinstance(doc, dict):
        return set().union(*(strings(k) | strings(v) for k, v in doc.items())) if doc else set()
    if isinstance(doc, list):
        return set().union(*(strings(v) for v in doc)) if doc else set()
    return set()


@pytest.mark.parametrize("command,fmt", CASES, ids=[f"{c}-{f}" for c, f in CASES])
def test_piped_output_holds_no_control_character_and_shows_the_hostile_strings_escaped(capture, command, fmt):
    got = run(command, fmt, capture)
    assert raw_controls(got.stdout) == [], f"raw control characters on stdout of {command} --format {fmt}"
    assert raw_controls(got.stderr) == [], f"raw control characters on stderr of {command}: {got.stderr!r}"
    if fmt in ("json", "jsonl"):
        docs = [json.loads(line) for line in got.stdout.splitlines()] if fmt == "jsonl" else [json.loads(got.stdout)]
        assert CLIENT_ID in strings(docs), "the JSON no longer holds the client id exactly as captured"
        return
    assert SHOWN in got.stdout, f"{command} --format {fmt} dropped the escape instead of showing it"
    if fmt == "table":
        too_wide = [line for line in got.stdout.splitlines() if cell_len(line) > WIDTH]
        assert not too_wide, f"{command}: lines wider than {WIDTH} columns"
    if command != "decode":  # decode's table folds the long id over two lines
        assert "[bold]x[/bold]" in got.stdout, "rich markup in a client id must stay literal"


@pytest.mark.parametrize("command", list(RUNS))
def test_with_colour_forced_the_only_escape_sequences_are_riches_own_styling(capture, command):
    got = run(command, "table", capture, colour=True)
    assert SGR.search(got.stdout), "colour was not forced on: the test would prove nothing"
    assert raw_controls(got.stdout, SGR) == [], f"{command}: raw control characters beside rich's styling"
    assert raw_controls(got.stderr, re.compile(f"{SGR.pattern}|{CURSOR.pattern}")) == [], got.stderr
    assert SHOWN in SGR.sub("", got.stdout)
    for hostile in HOSTILE:
        assert hostile not in got.stdout and hostile not in got.stderr


def test_decode_names_the_client_software_escaped_on_stderr(capture):
    got = run("decode", "jsonl", capture)
    assert "apache-kafka-java" + SHOWN in got.stderr
    assert json.loads(got.stdout.splitlines()[0])["client_software"].startswith(SOFTWARE_NAME)


@pytest.mark.parametrize("fmt", ["table", "markdown", "html"])
def test_a_report_written_with_output_holds_no_control_character(capture, tmp_path, fmt):
    out = tmp_path / f"report.{fmt}"
    got = run("analyze", fmt, capture, "--output", out)
    text = out.read_text(encoding="utf-8")
    assert raw_controls(text) == [] and raw_controls(got.stderr) == []
    assert SHOWN in text


def test_the_html_page_shows_the_escape_as_text_and_its_chart_data_stays_valid_json(capture):
    page = run("analyze", "html", capture).stdout
    data = re.search(r'<script type="application/json" id="fetchtool-data">(.*?)</script>', page, re.S)
    assert data is not None
    charts = json.loads(data.group(1))
    labels = [c["client"] for c in charts["clients"]]
    assert any(label.startswith("evil" + SHOWN) for label in labels), labels


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_broker_logs_a_hostile_client_id_escaped():
    broker = popen("broker", "--host", "127.0.0.1", "--port", _free_port(), stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE)
    try:
        ready = broker.stdout.readline()
        assert ready.startswith("listening on "), ready
        port = int(ready.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
            # an incremental fetch of a session the broker never created: logged with the client id
            conn.sendall(fetch_request(12, 1, CLIENT_ID, 12345, 1, []))
            size = int.from_bytes(conn.recv(4, socket.MSG_WAITALL), "big")
            assert size > 0
            conn.recv(size, socket.MSG_WAITALL)
        time.sleep(0.2)
    finally:
        broker.terminate()
        _out, log = broker.communicate(timeout=20)
    assert "FETCH_SESSION_ID_NOT_FOUND" in log, log
    assert f"client_id=evil{SHOWN}" in log
    assert raw_controls(log) == [], f"raw control characters in the broker's log: {log!r}"
