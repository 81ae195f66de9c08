"""Start-up as the shell sees it: `fetchtool --help` and `fetchtool COMMAND --help`, each a new process of the
installed `fetchtool` script, beside `python -c pass` (the interpreter alone: the floor) and `python -c "import
typer"` (the floor of any typer command line).

    python benchmarks/bench_startup.py [--runs 7] [--fetchtool PATH]

Every round runs each command line once, in turn, so that a busy machine slows them all alike; the table gives
wall time (min and median over the rounds) and the child's CPU time (user + system, from its rusage: steadier
than wall time on a shared machine). Target (the performance issue): every help screen under 0.1 s.

fetchtool's modules are compiled to bytecode first (compileall, as `pip install` does), so that a source tree
run with PYTHONDONTWRITEBYTECODE set is not timed compiling itself. Which fetchtool is timed: the one the script
imports (set PYTHONPATH to time a source tree).
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = ["analyze", "decode", "sessions", "savings", "simulate", "replay", "broker", "synth"]
TARGET_S = 0.1


def fetchtool_script(given: str | None) -> str:
    """The console script: --fetchtool, else the one beside this Python, else the one on PATH."""
    beside = Path(sys.executable).parent / "fetchtool"
    found = given or (str(beside) if beside.exists() else shutil.which("fetchtool"))
    if not found:
        sys.exit("no fetchtool script: pip install -e . (or give --fetchtool PATH)")
    return found


def interpreter(script: str) -> str:
    """The Python the script runs on (its #! line): the floor is timed on the same one."""
    with open(script, "rb") as f:
        first = f.readline().decode(errors="replace")
    return first[2:].strip().split()[0] if first.startswith("#!") and "python" in first else sys.executable


def compile_fetchtool(python: str) -> Path:
    """Compile the fetchtool package that Python imports; its directory."""
    where = subprocess.run([python, "-c", "import fetchtool, os; print(os.path.dirname(fetchtool.__file__))"],
                           capture_output=True, text=True, check=True, cwd="/").stdout.strip()  # not ./fetchtool
    compileall.compile_dir(where, quiet=1)
    return Path(where)


def run_once(argv: list[str]) -> tuple[float, float]:
    """(wall s, CPU s) of one run of argv, output discarded."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ,
                                                                                         "COLUMNS": "80"})
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} exited {proc.returncode}")
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7, help="rounds (each runs every command line once)")
    ap.add_argument("--fetchtool", help="the fetchtool script to time (default: beside this Python, or on PATH)")
    args = ap.parse_args()
    script = fetchtool_script(args.fetchtool)
    python = interpreter(script)
    package = compile_fetchtool(python)
    lines = {"python -c pass": [python, "-c", "pass"],
             "python -c 'import typer'": [python, "-c", "import typer"],
             "fetchtool --help": [script, "--help"]}
    lines.update({f"fetchtool {c} --help": [script, c, "--help"] for c in COMMANDS})
    for argv in lines.values():  # warm the file cache
        run_once(argv)
    walls: dict[str, list[float]] = {name: [] for name in lines}
    cpus: dict[str, list[float]] = {name: [] for name in lines}
    for _ in range(args.runs):
        for name, argv in lines.items():
            wall, cpu = run_once(argv)
            walls[name].append(wall)
            cpus[name].append(cpu)
    print(f"fetchtool from {package}; {args.runs} runs each, load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs")
    print(f"{'command line':32} {'wall min':>9} {'median':>8} {'CPU min':>9} {'median':>8}")
    for name in lines:
        w, c = walls[name], cpus[name]
        mark = "" if name.startswith("python") else ("  ok" if min(w) < TARGET_S else "  over 0.1 s")
        print(f"{name:32} {min(w) * 1000:7.0f}ms {statistics.median(w) * 1000:6.0f}ms "
              f"{min(c) * 1000:7.0f}ms {statistics.median(c) * 1000:6.0f}ms{mark}")
    if os.getloadavg()[0] > (os.cpu_count() or 1):
        print("the machine is busier than its CPUs: each process waits for a CPU, so wall time runs past CPU time; "
              "on an idle machine wall time comes down to about the CPU time")


if __name__ == "__main__":
    main()
