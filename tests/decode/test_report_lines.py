"""The decode report's lines on stderr: written as rich's console writes them, without importing rich for a
report of plain lines (a tenth of `decode`'s time from the shell went to importing it)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stderr
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from fetchtool.commands.output import StderrLines, error_console

ROOT = Path(__file__).resolve().parents[2]

# Report-like text: words, counts, addresses, colons, brackets, spaces at either end, and now and then a
# character rich or the escaping treats its own way.
_pieces = st.sampled_from(["files", ": ", "packets:", " ", "  ", "10.0.0.1:9092", ":smile:", ":x", "[bold]", "[",
                           "]", "\\", "é", "\x1b", "\t", "\u202e", ",", "1,234", "(key 1)", "fe80::1", ":100:"])
_lines = st.lists(_pieces, max_size=12).map("".join)


@settings(max_examples=300, deadline=None)
@given(_lines, st.sampled_from([False, None]))
def test_a_line_is_written_as_the_stderr_console_writes_it(line, markup):
    by_rich, ours = io.StringIO(), io.StringIO()
    with redirect_stderr(by_rich):
        error_console(soft_wrap=True).print(line, highlight=False, markup=markup)
    with redirect_stderr(ours):
        StderrLines().print(line, markup=markup)
    assert ours.getvalue() == by_rich.getvalue()


def test_a_long_line_is_not_wrapped(capsys):
    line = "connections: " + ", ".join(f"10.0.0.{i}:9092" for i in range(40))
    StderrLines().print(line)
    assert capsys.readouterr().err == line + "\n"


def _modules_after(args: list[str], tmp_path: Path) -> list[str]:
    probe = ("import atexit, json, os, sys\n"
             "atexit.register(lambda: json.dump(sorted(n for n, m in sys.modules.items() if m is not None),"
             " open(os.environ['MODULES_OUT'], 'w')))\n"
             "sys.argv[0] = 'fetchtool'\n"
             "from fetchtool.__main__ import main\nmain()\n")
    out = tmp_path / "modules.json"
    env = {**os.environ, "MODULES_OUT": str(out), "PYTHONPATH": str(ROOT)}
    env.pop("FORCE_COLOR", None)
    env.pop("TTY_COMPATIBLE", None)
    subprocess.run([sys.executable, "-c", probe, *args], env=env, capture_output=True, check=False, timeout=120)
    return json.loads(out.read_text())


def test_decoding_into_a_pipe_imports_no_rich(tmp_path):
    # (a report naming a client's software, "client 10.0.0.1:5000: name/version", goes through rich: ":5000:"
    # could be an emoji code for all this path knows)
    capture = ROOT / "captures" / "scenarios" / "eviction-thrash.pcap"
    modules = _modules_after(["decode", str(capture), "--format", "jsonl"], tmp_path)
    assert "fetchtool.decoder" in modules
    assert [m for m in modules if m == "rich" or m.startswith("rich.")] == []


def test_rich_imported_after_the_output_module_escapes_control_characters():
    code = ("import fetchtool.commands.output as out\n"
            "import rich.text\n"
            "assert rich.text.strip_control_codes is out._escaped_for_rich\n"
            "print(rich.text.Text('a\\x07b\\x1bc').plain)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout == "a\\x07b\\x1bc\n"
