"""Mutated captures through the real command line, as a support engineer runs it (a subprocess, output piped).

Each run damages a real capture (mutate.damage_capture: bit flips, a cut, absurd record lengths, absurd
timestamps, absurd Kafka sizes and counts) and runs one of analyze / sessions / savings (--format json) or
decode (--format jsonl) on it. What every run must show (`check`):
  - exit code 0, 1 (a one-line error) or 3 (no Kafka traffic found)
  - no traceback anywhere, and stderr lines that are single readable lines
  - when it exits 0: stdout is valid JSON (decode: one JSON object per line)
  - it ends within TIMEOUT seconds

    python -m tests.fuzz.run --target cli --runs 300 --seed 18
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from . import mutate

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 60.0
# Small real captures from four clients and three brokers: mutations reach every layer quickly.
SOURCES = ("captures/kafka-python-tansu.pcap", "captures/aiokafka-tansu.pcap", "captures/confluent-kafka-tansu.pcap",
           "captures/scenarios/epoch-retry.pcap", "captures/scenarios/snapshot-errors.pcap",
           "captures/scenarios/topic-id-switch.pcap", "captures/noida/kafka-python-noida.pcap",
           "captures/kafka-python-limits-tansu.pcapng")
COMMANDS = (("analyze", "--format", "json"), ("sessions", "--format", "json"), ("savings", "--format", "json"),
            ("decode", "--format", "jsonl"))


def run_cli(args, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "120", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "fetchtool", *map(str, args)], capture_output=True, text=True,
                          errors="replace", timeout=timeout, env=env, cwd=REPO)


def check(proc: subprocess.CompletedProcess, command: str) -> str | None:
    """What is wrong with this run (None: nothing)."""
    if "Traceback" in proc.stderr or "Traceback" in proc.stdout:
        return "traceback"
    if proc.returncode not in (0, 1, 3):
        return f"exit code {proc.returncode}"
    if proc.returncode == 1:
        errors = [line for line in proc.stderr.splitlines() if line.lower().startswith(("error", "fetchtool:"))]
        if not errors:
            return f"exit 1 without a one-line error: {proc.stderr[-300:]!r}"
    if proc.returncode == 0:
        try:
            if command == "decode":
                for line in proc.stdout.splitlines():
                    json.loads(line)
            else:
                json.loads(proc.stdout)
        except ValueError as exc:
            return f"invalid JSON: {exc}"
    return None


def cases(count: int, seed: int):
    """(name, capture bytes, command) for `count` runs, reproducible from `seed`."""
    rng = random.Random(seed)
    originals = [(Path(s).stem, (REPO / s).read_bytes()) for s in SOURCES]
    for i in range(count):
        stem, data = originals[i % len(originals)]
        kind, damaged = mutate.damage_capture(rng, data)
        yield f"{i:04d}-{stem}-{kind}", damaged, COMMANDS[(i // len(originals)) % len(COMMANDS)]


def campaign(count: int, seed: int, out: Path, minutes: float | None = None) -> int:
    work = out / "inputs"
    work.mkdir(parents=True, exist_ok=True)
    deadline = time.time() + minutes * 60 if minutes else None
    codes: dict[int, int] = {}
    failures = []
    done = 0
    started = time.time()
    for name, data, command in cases(count, seed):
        if deadline and time.time() > deadline:
            break
        path = work / f"{name}.pcap"
        path.write_bytes(data)
        try:
            proc = run_cli([*command[:1], path, *command[1:]])
            problem = check(proc, command[0])
            codes[proc.returncode] = codes.get(proc.returncode, 0) + 1
        except subprocess.TimeoutExpired:
            problem, proc = f"no answer in {TIMEOUT:.0f} s", None
        done += 1
        if problem:
            failures.append((name, command[0], problem))
            print(f"FAIL {name} {command[0]}: {problem}", flush=True)
            if proc is not None:
                (out / f"{name}.{command[0]}.stderr").write_text(proc.stderr)
        else:
            path.unlink()
        if done % 25 == 0:
            print(f"{done} runs, exit codes {codes}, {len(failures)} failures", flush=True)
    print(f"cli: {done} runs in {time.time() - started:.0f} s, exit codes {codes}, {len(failures)} failures")
    return 1 if failures else 0
