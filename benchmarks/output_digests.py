"""Digest every command's machine-readable output on captures/, to show a speed-up changed no output.

    python benchmarks/output_digests.py --write before.json        # on the old code
    python benchmarks/output_digests.py --compare before.json      # on the new code: lists every difference

Covers analyze, sessions and savings as JSON, decode as JSONL and simulate as JSON (two cache sizes), on every
pcap/pcapng under captures/ and on any extra capture given with --capture (e.g. the benchmark captures).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

COMMANDS = {
    "analyze": ["analyze", "--format", "json"],
    "sessions": ["sessions", "--format", "json"],
    "savings": ["savings", "--format", "json"],
    "decode": ["decode", "--format", "jsonl"],
    "simulate": ["simulate", "--format", "json", "--cache-slots", "2,1000"],
}


def captures(extra: list[str]) -> list[Path]:
    found = sorted(p for p in (ROOT / "captures").rglob("*") if p.suffix in (".pcap", ".pcapng"))
    return found + [Path(e).resolve() for e in extra]


def digest(command: str, capture: Path) -> tuple[str, str]:
    args = [sys.executable, "-m", "fetchtool", *COMMANDS[command], str(capture)]
    run = subprocess.run(args, capture_output=True, cwd=capture.parent)
    key = f"{command} {capture.relative_to(ROOT) if capture.is_relative_to(ROOT) else capture}"
    return key, f"exit {run.returncode} sha256 {hashlib.sha256(run.stdout).hexdigest()} bytes {len(run.stdout)}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", metavar="FILE")
    parser.add_argument("--compare", metavar="FILE")
    parser.add_argument("--capture", action="append", default=[], metavar="PCAP")
    parser.add_argument("--jobs", type=int, default=2)
    opts = parser.parse_args()
    work = [(c, p) for p in captures(opts.capture) for c in COMMANDS]
    with ThreadPoolExecutor(opts.jobs) as pool:
        digests = dict(pool.map(lambda job: digest(*job), work))
    if opts.write:
        Path(opts.write).write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")
    if opts.compare:
        before = json.loads(Path(opts.compare).read_text())
        differ = sorted(k for k in before.keys() | digests.keys() if before.get(k) != digests.get(k))
        for key in differ:
            print(f"differs: {key}\n  before {before.get(key)}\n  now    {digests.get(key)}")
        print(f"{len(digests)} outputs, {len(differ)} differ")
        return 1 if differ else 0
    print(f"{len(digests)} outputs digested")
    return 0


if __name__ == "__main__":
    sys.exit(main())
