"""`fetchtool analyze --engine spark` with files a customer attached that are no captures: the one counted warning
names them as the polars engine does (the first three in file order, then how many more)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

THRASH = Path(__file__).resolve().parents[2] / "captures" / "scenarios" / "eviction-thrash.pcap"
FETCHTOOL = [shutil.which("fetchtool")] if shutil.which("fetchtool") else [sys.executable, "-m", "fetchtool"]


def test_the_spark_engine_names_several_unreadable_files_on_one_line(spark_available, tmp_path):
    bad = [tmp_path / f"note{i}.pcap" for i in range(5)]
    for path in bad:
        path.write_text("customer notes, not a capture\n")
    shuffled = [bad[3], bad[0], bad[4], bad[2], bad[1]]  # Spark reads files in name order, whatever the order given
    proc = subprocess.run([*FETCHTOOL, "analyze", "--engine", "spark", "--master", "local[2]", "--format", "json",
                           str(THRASH), *map(str, shuffled)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("warning: unreadable_file")]
    assert len(lines) == 1, proc.stderr[-2000:]
    parts = lines[0].split("; ")
    assert parts[0].startswith(f"warning: unreadable_file (x5): {bad[0]}: not a pcap")
    assert [p.split(":")[0] for p in parts[1:3]] == [str(bad[1]), str(bad[2])]
    assert parts[3] == "and 2 more"
