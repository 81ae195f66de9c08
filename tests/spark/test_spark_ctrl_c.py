"""Ctrl-C at any moment of a Spark command: exit 130, no traceback, and no process of it left behind (PySpark 4
left its JVM running when the Ctrl-C came while the JVM started, and printed py4j's tracebacks when it came
during a job)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from capture_files import split_pcap

pytestmark = [pytest.mark.spark, pytest.mark.slow]

CAPTURES = Path(__file__).resolve().parents[2] / "captures"


def _processes_with(tag: str) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and tag.encode() in (d / "environ").read_bytes():
                pids.append(int(d.name))
        except OSError:
            pass
    return pids


@pytest.mark.parametrize("after_s", [0.3, 1.0, 2.0, 4.0])
def test_ctrl_c_ends_a_spark_command_quietly_and_leaves_nothing_running(spark_available, tmp_path, after_s):
    files = split_pcap(CAPTURES / "scenarios" / "eviction-thrash.pcap", tmp_path / "rotated", pieces=8)
    tag = f"FETCHTOOL_CTRL_C_TEST={uuid.uuid4().hex}"
    name, value = tag.split("=")
    cmd = [sys.executable, "-m", "fetchtool", "analyze", *map(str, files), "--engine", "spark", "--master", "local[2]",
           "--format", "json"]
    # a terminal's Ctrl-C: SIGINT to the command's whole process group, its handler the default one
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, name: value},
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(after_s)
    os.killpg(proc.pid, signal.SIGINT)
    err = proc.communicate(timeout=120)[1].decode()
    assert proc.returncode in (130, 0), err  # 0: the command had already ended
    assert "Traceback" not in err and "ERROR" not in err, err
    deadline = time.monotonic() + 10  # the JVM ends at the end of its stdin, once its driver has gone
    while (left := _processes_with(tag)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == []
