"""Fixtures of the command-line scenarios: a capture big enough to interrupt."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_runs import REPO


@pytest.fixture(scope="session")
def big_capture_set(tmp_path_factory) -> list[Path]:
    """24 names for one 40 MB generated Fetch capture (benchmarks/make_bench_capture.py): read one after the
    other they take half a minute and more, time enough to press Ctrl-C while a command still reads (the
    command is interrupted after seconds: the set's size costs no test time)."""
    d = tmp_path_factory.mktemp("big")
    one = d / "bench.pcapng"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "make_bench_capture.py"), str(one), "--size-mb", "40"],
                   check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    names = []
    for i in range(24):
        link = d / f"part{i}.pcapng"
        link.symlink_to(one)
        names.append(link)
    return names
