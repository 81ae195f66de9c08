"""A support engineer's mistyped command line, run through the real `fetchtool` console script.

Whatever click refuses while parsing (a value of the wrong type, an unknown option or command, a missing argument
or option value, a bad choice) gets the same single "error: " line on stderr and exit 2 as the commands' own
checks, naming what was wrong; never click's boxed usage text. Help, and exit 1 for unusable input, stay as they were.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

THRASH = str(Path(__file__).resolve().parents[2] / "captures" / "scenarios" / "eviction-thrash.pcap")

# The console script pip installed (fetchtool.__main__:main); `python -m fetchtool` runs the same main().
FETCHTOOL = [shutil.which("fetchtool")] if shutil.which("fetchtool") else [sys.executable, "-m", "fetchtool"]


def fetchtool(*args: str) -> subprocess.CompletedProcess:
    # every case here fails while parsing, before anything listens or reads: the timeout only guards a regression
    return subprocess.run([*FETCHTOOL, *args], capture_output=True, text=True, timeout=60)


def usage_error(proc: subprocess.CompletedProcess) -> str:
    """The one line a usage error leaves on stderr, with exit 2 and nothing on stdout."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert proc.stdout == ""
    return lines[0]


@pytest.mark.parametrize(("args", "named"), [
    (["analyze", THRASH, "--cache-slots", "abc"], ["--cache-slots", "integer", "'abc'"]),
    (["broker", "--port", "abc"], ["--port", "integer", "'abc'"]),
    (["replay", THRASH, "--speed", "fast", "--dry-run"], ["--speed", "number", "'fast'"]),
    (["savings", THRASH, "--port", "9092", "--port", "x"], ["--port", "'x'"]),
], ids=["int", "broker-port", "float", "repeated-int"])
def test_a_value_of_the_wrong_type_names_the_option_and_the_value(args, named):
    line = usage_error(fetchtool(*args))
    assert all(word in line for word in named), line


def test_an_unknown_option_is_named():
    assert "--bogus" in usage_error(fetchtool("analyze", "--bogus", "x", THRASH))


def test_a_misspelt_option_is_named_with_the_options_it_may_have_meant():
    line = usage_error(fetchtool("analyze", THRASH, "--cache-slot", "3"))
    assert "--cache-slot" in line and "--cache-slots" in line.split("--cache-slot ", 1)[1]


def test_an_unknown_option_before_any_command_is_named():
    assert "--bogus" in usage_error(fetchtool("--bogus"))


def test_an_unknown_command_is_named_and_the_likely_one_suggested():
    line = usage_error(fetchtool("analyse", THRASH))
    assert "'analyse'" in line and "'analyze'" in line


def test_a_missing_capture_argument_is_named():
    assert "missing argument capture" in usage_error(fetchtool("analyze"))


def test_an_option_given_without_its_value_is_named():
    assert "--port" in usage_error(fetchtool("broker", "--port"))


def test_a_flag_given_a_value_is_named():
    assert "--verbose" in usage_error(fetchtool("broker", "--verbose=3"))


@pytest.mark.parametrize("command", ["decode", "analyze"])
def test_a_bad_choice_reads_the_same_whether_click_or_the_command_refuses_it(command):
    # decode's --format is an Enum click checks; analyze's a string the command checks with check_choice
    line = usage_error(fetchtool(command, THRASH, "--format", "xml"))
    assert line.startswith("error: unknown --format 'xml' (choose from table") or \
        line.startswith("error: unknown --format 'xml' (choose from jsonl, table)"), line


def test_without_arguments_the_help_is_printed_as_before():
    proc = fetchtool()
    assert proc.returncode == 2
    assert "Usage: fetchtool" in proc.stdout and "analyze" in proc.stdout
    assert "error" not in proc.stderr.lower()


@pytest.mark.parametrize("command", ["analyze", "decode", "sessions", "savings", "simulate", "replay", "broker",
                                     "synth"])
def test_every_command_still_has_its_help(command):
    proc = fetchtool(command, "--help")
    assert proc.returncode == 0, proc.stderr
    assert f"Usage: fetchtool {command}" in proc.stdout and proc.stderr == ""


def test_input_that_cannot_be_used_still_exits_1_with_one_line(tmp_path):
    proc = fetchtool("analyze", str(tmp_path / "missing.pcap"))
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [f"error: {tmp_path / 'missing.pcap'}: cannot open: No such file or directory"]
