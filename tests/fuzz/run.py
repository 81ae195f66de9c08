"""Long fuzz campaigns, from the repository root:

    python -m tests.fuzz.run --target reader --minutes 10          # atheris when installed, else mutations
    python -m tests.fuzz.run --target all --minutes 40             # each target for minutes / 4
    python -m tests.fuzz.run --target codec --engine mutate --runs 50000 --seed 7
    python -m tests.fuzz.run --target cli --runs 300               # mutated captures through the CLI

Targets: reader, codec, stream, broker (tests/fuzz/targets.py) and cli (cli.py). Seeds come from
tests/fuzz/corpus/ (tests/fuzz/seeds.py cuts them from captures/). A crash does not stop the campaign: each
distinct one (exception type + the innermost fetchtool frame) is saved once to <out>/<target>/crashes/ with its
traceback beside it. Keep one as a regression with `cp <crash>.bin tests/fuzz/regressions/<target>-<what>.bin`:
tests/fuzz/test_fuzz.py decodes every file there. atheris also grows <out>/<target>/corpus/ (inputs that found
new coverage); it is not committed. The summary line at the end gives inputs run and distinct crashes.

Engines: `atheris` (coverage-guided libFuzzer, `pip install atheris`, x86-64 Linux wheels for CPython 3.11) and
`mutate` (tests/fuzz/mutate.py on the seeds, no coverage feedback; deterministic for a given --seed).
"""

from __future__ import annotations

import argparse
import hashlib
import random
import re
import sys
import time
import traceback
from pathlib import Path

from . import mutate as mut
from . import seeds
from .limits import within_cpu

HERE = Path(__file__).resolve().parent
TARGETS = ("reader", "codec", "stream", "broker")
CPU_LIMIT = 10.0  # seconds of CPU one input may take before it is a finding (limits.Hang)


class CrashLog:
    def __init__(self, out: Path, target: str):
        self.dir = out / target / "crashes"
        self.signatures: dict[str, int] = {}
        self.runs = 0

    def record(self, data: bytes, exc: BaseException) -> None:
        sig = signature(exc)
        self.signatures[sig] = self.signatures.get(sig, 0) + 1
        if self.signatures[sig] > 1:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        name = f"{sig}-{hashlib.sha1(data).hexdigest()[:10]}"
        (self.dir / f"{name}.bin").write_bytes(data)
        (self.dir / f"{name}.txt").write_text("".join(traceback.format_exception(exc)))
        print(f"\nCRASH {sig}: {type(exc).__name__}: {str(exc)[:200]} -> {self.dir / name}.bin", flush=True)

    def summary(self, target: str, seconds: float) -> str:
        crashes = sum(self.signatures.values())
        return (f"{target}: {self.runs:,} inputs in {seconds:.0f} s, {len(self.signatures)} distinct crashes "
                f"({crashes} crashing inputs)" + "".join(f"\n  {s}: {n}" for s, n in self.signatures.items()))


def signature(exc: BaseException) -> str:
    """Exception type and the innermost frame in fetchtool/ (else the innermost frame) where it was raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/fetchtool/" in f.filename] or frames[-1:]
    where = f"{Path(ours[-1].filename).stem}.{ours[-1].name}.{ours[-1].lineno}" if ours else "unknown"
    return re.sub(r"[^A-Za-z0-9_.-]", "", f"{type(exc).__name__}-{where}")


def target_function(name: str):
    from . import targets

    return targets.TARGETS[name]


def run_mutate(target: str, deadline: float, runs: int | None, seed: int, log: CrashLog) -> None:
    fn = target_function(target)
    corpus = seeds.load(target)
    rng = random.Random(seed)
    for s in corpus:  # the seeds themselves first
        _one(fn, s, log)
    while (runs is None or log.runs < runs) and time.time() < deadline:
        data = mut.mutate(rng, rng.choice(corpus), corpus)
        _one(fn, data, log)
        if log.runs % 5000 == 0:
            print(f"#{log.runs} crashes={len(log.signatures)}", flush=True)


def _one(fn, data: bytes, log: CrashLog) -> None:
    log.runs += 1
    try:
        within_cpu(fn, data, CPU_LIMIT)
    except Exception as exc:  # noqa: BLE001  (every exception is a finding)
        log.record(data, exc)


def run_atheris(target: str, seconds: int, runs: int | None, seed: int, log: CrashLog, out: Path) -> None:
    import atheris

    with atheris.instrument_imports(include=["fetchtool", "kio", "kafka"]):
        fn = target_function(target)
        # instrument_imports only sees modules imported inside it: load the lazily imported ones now.
        import fetchtool.protocol._fetch_flex  # noqa: F401
        import fetchtool.protocol._fetch_kio  # noqa: F401
        import fetchtool.protocol._fetch_legacy  # noqa: F401
        import kafka.protocol.consumer.fetch  # noqa: F401
        if target == "broker":
            import fetchtool.broker.handler  # noqa: F401
    corpus_dir = out / target / "corpus"
    corpus_dir.mkdir(parents=True, exist_ok=True)
    for s in seeds.load(target):
        (corpus_dir / hashlib.sha1(s).hexdigest()).write_bytes(s)

    def test_one(data: bytes) -> None:
        _one(fn, data, log)
        if log.runs % 10000 == 0:
            print(log.summary(target, time.time() - started), flush=True)

    started = time.time()

    args = [sys.argv[0], str(corpus_dir), f"-seed={seed}", f"-max_total_time={seconds}", "-timeout=120",
            "-rss_limit_mb=3072", "-max_len=65536", "-print_final_stats=1", "-close_fd_mask=0",
            f"-artifact_prefix={out / target}/"]  # libFuzzer's own slow-unit / oom files, not in the cwd
    if runs is not None:
        args.append(f"-runs={runs}")
    atheris.Setup(args, test_one)
    try:
        atheris.Fuzz()
    except SystemExit:
        pass


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--target", default="all", choices=(*TARGETS, "cli", "all"))
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--runs", type=int, default=None, help="stop after this many inputs (per target)")
    p.add_argument("--engine", choices=("auto", "atheris", "mutate"), default="auto")
    p.add_argument("--seed", type=int, default=18)
    p.add_argument("--out", type=Path, default=Path("fuzz-out"))
    a = p.parse_args(argv)
    if a.target == "cli":
        from . import cli

        return cli.campaign(a.runs or 300, a.seed, a.out / "cli", minutes=a.minutes)
    engine = a.engine
    if engine == "auto":
        try:
            import atheris  # noqa: F401

            engine = "atheris"
        except ImportError:
            engine = "mutate"
    names = TARGETS if a.target == "all" else (a.target,)
    if engine == "atheris" and len(names) > 1:
        # libFuzzer runs once per process: one child per target
        import subprocess

        each = a.minutes / len(names)
        rc = 0
        for name in names:
            cmd = [sys.executable, "-m", "tests.fuzz.run", "--target", name, "--minutes", str(each), "--engine",
                   "atheris", "--seed", str(a.seed), "--out", str(a.out)]
            if a.runs:
                cmd += ["--runs", str(a.runs)]
            rc |= subprocess.call(cmd)
        return rc
    found = 0
    for name in names:
        log = CrashLog(a.out, name)
        seconds = a.minutes * 60 / len(names)
        start = time.time()
        if engine == "atheris":
            import atexit

            atexit.register(lambda log=log, name=name, start=start: print(log.summary(name, time.time() - start)))
            run_atheris(name, int(seconds), a.runs, a.seed, log, a.out)
        else:
            run_mutate(name, start + seconds, a.runs, a.seed, log)
            print(log.summary(name, time.time() - start))
        found += len(log.signatures)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
