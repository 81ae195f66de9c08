"""A user ends a command early: Ctrl-C stops the reading (or the replay) and still reports what was done, exit
130; a reader that goes away (`| head -1`) ends the command quietly with exit 0. And a report fits the width
asked for: --width N, or $COLUMNS when the output is piped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from cli_runs import CHURN, READERS, REBALANCE, fetchtool, popen

INTERRUPTED = 130


def interrupt_after(seconds: float, *args) -> tuple[int, str, str]:
    proc = popen(*args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(seconds)
    assert proc.poll() is None, "the command ended before Ctrl-C: the test's capture is too small"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


@pytest.mark.slow
def test_ctrl_c_in_analyze_reports_what_was_read(big_capture_set):
    code, out, err = interrupt_after(4, "analyze", *big_capture_set, "-f", "json")
    assert code == INTERRUPTED, err
    doc = json.loads(out)
    assert doc["interrupted"] is True and doc["capture"]["exchanges"] > 0
    assert "interrupted: the report covers what was read before Ctrl-C" in err and "Traceback" not in err


@pytest.mark.slow
def test_ctrl_c_in_decode_keeps_the_rows_written_and_says_so(big_capture_set):
    code, out, err = interrupt_after(4, "decode", *big_capture_set)
    assert code == INTERRUPTED, err
    rows = [json.loads(line) for line in out.splitlines()]  # every line whole
    assert rows and "interrupted:" in err.splitlines()[-1]


@pytest.mark.slow
def test_ctrl_c_in_replay_gives_the_partial_report():
    code, out, err = interrupt_after(6, "replay", REBALANCE, "--speed", "0.2", "-f", "json")
    assert code == INTERRUPTED, err
    doc = json.loads(out)
    assert doc["interrupted"] is True and 0 < doc["totals"]["requests"] < doc["captured"]["requests"]
    assert any("the replay stopped after" in note for note in doc["notes"])


@pytest.mark.parametrize("command", READERS)
def test_a_reader_that_goes_away_ends_the_command_quietly(command):
    # the pipe is closed before the command writes: every write of the report meets EPIPE, as after `| head -1`
    proc = popen(command, CHURN, *READERS[command], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0, err
    assert "Traceback" not in err and "Broken pipe" not in err and "BrokenPipe" not in err


@pytest.mark.parametrize("args", [["--help"], ["analyze", "--help"], ["decode", "-h"]], ids=" ".join)
def test_a_help_screen_whose_reader_goes_away_ends_quietly(args):
    proc = popen(*args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0, err
    assert err == ""


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("args", [["--help"], ["savings", "--help"]], ids=" ".join)
def test_a_help_screen_on_a_full_disk_is_one_error_line(args):
    with open("/dev/full", "w") as full:
        proc = popen(*args, stdout=full, stderr=subprocess.PIPE)
        err = proc.stderr.read()
    assert proc.wait(timeout=60) == 1
    assert err == "error: cannot write the help: No space left on device\n"


def test_replay_byte_counts_that_differ_from_the_capture_are_explained():
    doc = json.loads(fetchtool("replay", REBALANCE, "--as-fast-as-possible", "-f", "json").stdout)
    assert doc["totals"]["response_bytes"] != doc["captured"]["response_bytes"]
    assert any(note.startswith("response bytes differ from the capture's") and "placeholder records" in note
               for note in doc["notes"])


@pytest.mark.parametrize("command", ["analyze", "sessions", "savings", "simulate"])
def test_piped_output_is_as_wide_as_columns_or_width_says(command):
    narrow = fetchtool(command, CHURN, env={"COLUMNS": "80"})
    assert narrow.returncode == 0, narrow.stderr
    assert max(map(len, narrow.stdout.splitlines())) <= 80
    wide = fetchtool(command, CHURN, "--width", "120", env={"COLUMNS": "80"})
    assert 80 < max(map(len, wide.stdout.splitlines())) <= 120


def test_a_width_too_narrow_for_a_table_is_a_usage_error():
    proc = fetchtool("analyze", CHURN, "--width", "5")
    assert proc.returncode == 2 and proc.stderr.startswith("error: --width must be a number >= 19")
