"""Whole commands timed from the shell, as a user meets them, side by side with tshark 4.4 in one run.

    python benchmarks/bench_commands.py /work/bench/bench100.pcap /work/bench/bench1g.pcap [--runs 5]
    python benchmarks/bench_commands.py CAPTURE --only tshark,decode-jsonl,decode-parquet --runs 3

Hyperfine-style: every command runs --runs times, the commands interleaved (run 1 of each, then run 2 of each,
...), so a machine shared with other work slows them alike. Each run is one process started from here with
its output to /dev/null, timed by wall clock, with its peak RSS and CPU from os.wait4 (a fetchtool command's
own, or its forked capture reader's if larger: what `/usr/bin/time` reports). Commands:

    tshark          tshark -r CAPTURE -T fields -e frame.number -e kafka.correlation_id -e kafka.fetch_session_id
                    -e kafka.fetch_session_epoch -e kafka.partition_id -e kafka.offset
    decode-jsonl    fetchtool decode --format jsonl CAPTURE
    decode-parquet  fetchtool decode --out DIR CAPTURE        (DIR removed before each run)
    analyze         fetchtool analyze --format json CAPTURE
    help            fetchtool --help                          (once per capture column: start-up only)

--baseline DIR also runs every fetchtool command with PYTHONPATH=DIR (a checkout of the code before a change),
interleaved with the rest, as NAME@base: before and after in one sitting.

Prints, per capture, min and median wall time, the ratio to tshark (tshark's time / the command's, from the
medians: above 1 is faster than tshark), peak RSS, CPU seconds (user + system, the forked reader's included) and
tshark's CPU / the command's (steadier than wall time on a busy machine), decode to Parquet over decode to JSONL
(min and median, issue #19's "within 30%"), then a Markdown table for the README.
`fetchtool` is the console script beside this Python (`--fetchtool` to name another).
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench_startup import compile_fetchtool, interpreter

TSHARK = os.environ.get("FETCHTOOL_TSHARK", "/opt/tshark44/tshark")
TSHARK_FIELDS = ("frame.number", "kafka.correlation_id", "kafka.fetch_session_id", "kafka.fetch_session_epoch",
                 "kafka.partition_id", "kafka.offset")
COMMANDS = ("tshark", "decode-jsonl", "decode-parquet", "analyze", "help")
LABELS = {
    "tshark": "tshark 4.4 -T fields",
    "decode-jsonl": "`fetchtool decode --format jsonl > /dev/null`",
    "decode-parquet": "`fetchtool decode --out DIR`",
    "analyze": "`fetchtool analyze --format json > /dev/null`",
    "help": "`fetchtool --help`",
}


@dataclass
class Runs:
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    rss_kb: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.wall)


def fetchtool_command(explicit: str | None) -> list[str]:
    if explicit:
        return explicit.split()
    beside = Path(sys.executable).with_name("fetchtool")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("fetchtool")
    return [found] if found else [sys.executable, "-m", "fetchtool"]


def argv_for(name: str, capture: Path, fetchtool: list[str], out_dir: Path) -> list[str]:
    if name == "tshark":
        fields = [a for f in TSHARK_FIELDS for a in ("-e", f)]
        return [TSHARK, "-r", str(capture), "-T", "fields", *fields]
    if name == "decode-jsonl":
        return [*fetchtool, "decode", "--format", "jsonl", str(capture)]
    if name == "decode-parquet":
        return [*fetchtool, "decode", "--out", str(out_dir), str(capture)]
    if name == "analyze":
        return [*fetchtool, "analyze", "--format", "json", str(capture)]
    if name == "help":
        return [*fetchtool, "--help"]
    raise ValueError(name)


def run_once(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int, int]:
    """(wall s, CPU s, peak RSS KB, exit status) of one run, its stdout and stderr to /dev/null."""
    with open(os.devnull, "wb") as null:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=null, stderr=null, env=env)
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, proc.returncode


BASE = "@base"


def label(name: str) -> str:
    command = name.removesuffix(BASE)
    return LABELS[command] + (" (baseline)" if name != command else "")


def bench(captures: list[Path], names: list[str], runs: int, fetchtool: list[str], baseline: str | None = None
          ) -> dict:
    results: dict[tuple[str, str], Runs] = {}
    with tempfile.TemporaryDirectory(prefix="bench-commands-") as tmp:
        out_dir = Path(tmp) / "out"
        for capture in captures:
            for i in range(runs):
                for name in names:
                    if name.startswith("help") and capture != captures[0]:
                        continue  # start-up does not depend on the capture: measured once
                    r = results.setdefault((str(capture), name), Runs())
                    shutil.rmtree(out_dir, ignore_errors=True)
                    argv = argv_for(name.removesuffix(BASE), capture, fetchtool, out_dir)
                    env = dict(os.environ, PYTHONPATH=baseline) if name.endswith(BASE) and baseline else None
                    wall, cpu, rss, code = run_once(argv, env)
                    if code != 0:
                        r.failures.append(f"exit {code}: {' '.join(argv)}")
                        continue
                    r.wall.append(wall)
                    r.cpu.append(cpu)
                    r.rss_kb.append(rss)
                    print(f"  {capture.name} run {i + 1}/{runs} {name:15s} {wall:7.2f} s  {cpu:6.2f} s CPU  "
                          f"{rss / 1024:7.0f} MB", flush=True)
    return results


def size_label(path: Path) -> str:
    mb = path.stat().st_size / 1e6
    return f"{mb / 1000:.1f} GB" if mb >= 1000 else f"{mb:.0f} MB"


def report(captures: list[Path], names: list[str], results: dict) -> None:
    print()
    for capture in captures:
        base = results.get((str(capture), "tshark"))
        base_med = statistics.median(base.wall) if base and base.ok else None
        print(f"{capture.name} ({size_label(capture)}):")
        base_cpu = statistics.median(base.cpu) if base and base.ok else None
        print(f"  {'command':16s} {'min s':>7s} {'median s':>9s} {'vs tshark':>10s} {'peak RSS':>9s} {'CPU s':>6s} "
              f"{'CPU vs tshark':>14s}")
        for name in names:
            r = results.get((str(capture), name))
            if r is None:
                continue
            if not r.ok:
                print(f"  {name:16s} failed: {r.failures[0] if r.failures else 'not run'}")
                continue
            med = statistics.median(r.wall)
            ratio = f"{base_med / med:.2f}x" if base_med and name != "tshark" else ""
            cpu = statistics.median(r.cpu)
            cpu_ratio = f"{base_cpu / cpu:.2f}x" if base_cpu and name != "tshark" else ""
            print(f"  {name:16s} {min(r.wall):7.2f} {med:9.2f} {ratio:>10s} {max(r.rss_kb) / 1024:7.0f} MB "
                  f"{cpu:6.2f} {cpu_ratio:>14s}")
            for f in r.failures:
                print(f"    ({f})")
        for tree in ("", BASE):
            jsonl = results.get((str(capture), "decode-jsonl" + tree))
            parquet = results.get((str(capture), "decode-parquet" + tree))
            if jsonl and parquet and jsonl.ok and parquet.ok:
                print(f"  decode-parquet{tree} / decode-jsonl{tree}: {min(parquet.wall) / min(jsonl.wall):.2f}x min, "
                      f"{statistics.median(parquet.wall) / statistics.median(jsonl.wall):.2f}x median")
    print()
    print("| command | " + " | ".join(size_label(c) for c in captures) + " |")
    print("|---|" + "---|" * len(captures))
    for name in names:
        cells = []
        for capture in captures:
            r = results.get((str(capture), name))
            base = results.get((str(capture), "tshark"))
            if r is None or not r.ok:
                cells.append("")
                continue
            med = statistics.median(r.wall)
            cell = f"{min(r.wall):.2f} / {med:.2f} s"
            if name != "tshark" and base is not None and base.ok:
                cell += f" ({statistics.median(base.wall) / med:.2f}x)"
            cell += f", {max(r.rss_kb) / 1024:.0f} MB"
            cells.append(cell)
        print(f"| {label(name)} | " + " | ".join(cells) + " |")
    print("\nmin / median wall of the runs (ratio: tshark's median / the command's), peak RSS")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("captures", nargs="+", type=Path)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", default=",".join(COMMANDS), help="comma-separated: " + ", ".join(COMMANDS))
    ap.add_argument("--fetchtool", help="the command that runs fetchtool (default: the script beside this Python)")
    ap.add_argument("--baseline", metavar="DIR", help="also run each fetchtool command with PYTHONPATH=DIR "
                                                      "(the code before a change), as NAME@base")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    if args.baseline:
        names = [m for n in names for m in ((n,) if n == "tshark" else (n + BASE, n))]
    unknown = [n for n in names if n.removesuffix(BASE) not in COMMANDS]
    if unknown:
        ap.error(f"unknown command {unknown[0]!r}; choose from {', '.join(COMMANDS)}")
    if "tshark" in names and not os.access(TSHARK, os.X_OK):
        print(f"tshark not found at {TSHARK} (FETCHTOOL_TSHARK): timing fetchtool alone", file=sys.stderr)
        names.remove("tshark")
    for c in args.captures:
        if not c.is_file():
            ap.error(f"{c}: no such capture")
    fetchtool = fetchtool_command(args.fetchtool)
    # Bytecode compiled first, as `pip install` does: a source tree run with PYTHONDONTWRITEBYTECODE would
    # otherwise be timed compiling every module it changed, on every run.
    compile_fetchtool(interpreter(fetchtool[0]) if fetchtool[0] != sys.executable else sys.executable)
    if args.baseline:
        compileall.compile_dir(Path(args.baseline) / "fetchtool", quiet=1)
    print(f"fetchtool: {' '.join(fetchtool)}; {args.runs} runs each, interleaved; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    results = bench(args.captures, names, args.runs, fetchtool, args.baseline)
    report(args.captures, names, results)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
