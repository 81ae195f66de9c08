"""Figures for a session storm: wall time, CPU time, max RSS and output size of the commands a support engineer
runs, each measured from the shell with /usr/bin/time -v, and tshark 4.4's time on the same file for comparison.
The CPU is also given per process, in the order they were first seen (usually the command, its decoding child,
the reader that child forks, then the savings process of analyze and sessions), since on two cores the wall time
is bound by the busiest process and by half the sum.

    python benchmarks/bench_session_storm.py [--sessions 100000] [--capture /tmp/storm100k.pcap] [--no-tshark]

Writes the capture with benchmarks/session_storm.py first when it is missing (to /tmp, never the repository).
Runs the fetchtool found on PATH (the one PYTHONPATH points at).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import tree_cpu

HERE = Path(__file__).resolve().parent
COMMANDS = (
    ("analyze --format json", ["analyze", "--format", "json"]),
    ("analyze (terminal)", ["analyze"]),
    ("analyze --format markdown", ["analyze", "--format", "markdown"]),
    ("analyze --format html", ["analyze", "--format", "html"]),
    ("sessions", ["sessions"]),
    ("sessions --format json", ["sessions", "--format", "json"]),
    ("savings --format json", ["savings", "--format", "json"]),
    ("savings (terminal)", ["savings"]),
    ("savings --format jsonl", ["savings", "--format", "jsonl"]),
    ("savings --format markdown", ["savings", "--format", "markdown"]),
    ("sessions --format markdown", ["sessions", "--format", "markdown"]),
    ("decode --format jsonl", ["decode", "--format", "jsonl"]),
    ("decode --format table", ["decode", "--format", "table"]),
)
# the installed command, as a user runs it; next to this Python when its environment is not on PATH
FETCHTOOL = shutil.which("fetchtool") or str(Path(sys.executable).with_name("fetchtool"))
TSHARK = os.environ.get("FETCHTOOL_TSHARK", "/opt/tshark44/tshark")


def timed(argv: list[str], out: Path) -> dict:
    """/usr/bin/time -v on argv, stdout to ``out``: wall seconds, CPU seconds (user + sys of the command and its
    children), max RSS MB, output bytes, exit status; and the CPU seconds of each of its processes (the command
    first, then the processes it forked: the decoding child and the reader), read from /proc while it runs."""
    with open(out, "wb") as sink, tempfile.NamedTemporaryFile("r", suffix=".time") as t:
        proc = subprocess.Popen(["/usr/bin/time", "-v", "-o", t.name, *argv], stdout=sink, stderr=subprocess.DEVNULL,
                                env=dict(os.environ, COLUMNS="160"))
        per_process = _watch(proc)
        rc = proc.returncode
        text = Path(t.name).read_text()
    wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", text)
    h, m, s = (float(x) if x else 0.0 for x in wall.groups())
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1))
    cpu = sum(float(re.search(rf"{kind} time \(seconds\): ([\d.]+)", text).group(1)) for kind in ("User", "System"))
    return {"wall_s": round(h * 3600 + m * 60 + s, 1), "cpu_s": round(cpu, 1), "max_rss_mb": round(rss / 1024, 1),
            "output_bytes": out.stat().st_size, "exit": rc, "cpu_per_process": per_process}


def _watch(proc: subprocess.Popen, every: float = 0.1) -> list[float]:
    """Wait for ``proc`` (/usr/bin/time), sampling every ``every`` seconds the CPU seconds of each process under
    it (_timing.tree_cpu), in the order they appeared. Empty where there is no /proc (not Linux)."""
    seen: dict[int, tuple[str, float]] = {}
    while proc.poll() is None:
        if os.path.isdir("/proc"):
            tree_cpu(proc.pid, seen)
        time.sleep(every)
    return [round(s, 1) for pid, (_kind, s) in seen.items() if pid != proc.pid]  # (not /usr/bin/time's own)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=100_000)
    ap.add_argument("--capture", type=Path, default=None)
    ap.add_argument("--no-tshark", action="store_true")
    ap.add_argument("--only", action="append", default=[], metavar="LABEL",
                    help="run only the commands whose label starts with this (repeatable), e.g. 'analyze --format json'")
    args = ap.parse_args(argv)
    capture = args.capture or Path(tempfile.gettempdir()) / f"storm{args.sessions}.pcap"
    if not capture.exists():
        truth = subprocess.run([sys.executable, str(HERE / "session_storm.py"), str(capture), "--sessions",
                                str(args.sessions)], check=True, capture_output=True, text=True).stdout
        print("capture:", truth.strip().splitlines()[-1])
    print(f"{capture} ({capture.stat().st_size / 1e6:,.1f} MB)")
    print(f"{'command':32} {'wall s':>8} {'CPU s':>7} {'max RSS MB':>11} {'output bytes':>14}  CPU s per process")
    with tempfile.TemporaryDirectory() as tmp:
        for label, cmd in COMMANDS:
            if args.only and not any(label.startswith(o) for o in args.only):
                continue
            r = timed([FETCHTOOL, *cmd, str(capture)], Path(tmp) / "out")
            flag = "" if r["exit"] == 0 else f"  (exit {r['exit']})"
            split = " + ".join(map(str, r["cpu_per_process"]))
            print(f"{label:32} {r['wall_s']:>8} {r['cpu_s']:>7} {r['max_rss_mb']:>11} {r['output_bytes']:>14,}  "
                  f"{split}{flag}")
        if not args.no_tshark and Path(TSHARK).exists():
            r = timed([TSHARK, "-r", str(capture), "-Y", "kafka", "-T", "fields", "-e", "kafka.api_key"],
                      Path(tmp) / "out")
            print(f"{'tshark 4.4 -Y kafka (fields)':32} {r['wall_s']:>8} {r['cpu_s']:>7} {r['max_rss_mb']:>11} "
                  f"{r['output_bytes']:>14,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
