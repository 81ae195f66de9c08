"""A capture whose clock is absurd (here: every timestamp 50,000 years ahead, past any calendar date, as when a
writer stores nanoseconds where microseconds belong) still gives every report, with the times shown as epoch
seconds: no traceback anywhere (#18: `ValueError: year 55840 is out of range` ended the terminal report)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fetchtool.capture.reader import read_records
from fetchtool.capture.writer import PcapNgWriter

ROOT = Path(__file__).resolve().parents[2]
FETCHTOOL = [shutil.which("fetchtool")] if shutil.which("fetchtool") else [sys.executable, "-m", "fetchtool"]
AHEAD = 50_000 * 365.25 * 86_400  # seconds: year ~52,000


@pytest.fixture(scope="module")
def far_future(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("absurd") / "java-rebalance-far-future.pcapng"
    with PcapNgWriter(out) as w:
        w.add_interface(1)  # Ethernet, microseconds
        for _frame, ts, linktype, _iface, buf, off, caplen, _orig in read_records(ROOT / "captures" / "kafka" /
                                                                                 "java-rebalance.pcap"):
            assert linktype == 1
            w.write(bytes(buf[off:off + caplen]), ts + AHEAD)
    return out


@pytest.mark.parametrize("args", [
    ["analyze"], ["analyze", "--format", "markdown"], ["analyze", "--format", "json"], ["analyze", "--format", "html"],
    ["sessions"], ["savings"], ["decode", "--format", "table"], ["decode"],
], ids=" ".join)
def test_every_report_of_a_capture_dated_beyond_any_calendar(far_future, args):
    run = subprocess.run([*FETCHTOOL, *args, str(far_future)], capture_output=True, text=True,
                         env={"COLUMNS": "100", "PATH": "/usr/bin:/bin"}, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr + run.stdout
    if args[-1] == "json":
        report = json.loads(run.stdout)
        assert report["capture"]["first_ts"] > AHEAD and report["capture"]["exchanges"] == 424
    elif args[0] == "analyze" and "--format" not in args:
        assert "beyond any calendar date" in run.stdout
