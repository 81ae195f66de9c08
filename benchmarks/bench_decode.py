"""Decode throughput side by side with tshark 4.4, and peak memory of a 1 GB Parquet decode.

    python benchmarks/bench_decode.py [--size-mb 100] [--repeat 3] [--path FILE] [--big [--big-size-mb 1024]]
    python benchmarks/bench_decode.py --size-mb 5 --repeat 1          # the CI smoke

Writes a capture with make_bench_capture.py (deterministic: same size and seed -> same file; kept in --workdir
so reruns skip generation) unless --path names one, then prints, for each of --repeat rounds run in turn:
  (a) decode_capture(in_child=False) in this process, iterating every Exchange (every partition entry
      decoded): `decode`'s split. On a large capture the reading and reassembly run in a forked child, so (a)'s
      CPU is this process's plus the child's; "here" is this process's alone,
  (d) decode_capture() as analyze runs it: the whole decode in a forked child, this process only rebuilding
      the items (decoding/forked.py); "here" is what is left on the consumer's core,
  (b) `fetchtool decode FILE --format jsonl > /dev/null` as a child process (includes interpreter start-up),
  (c) tshark 4.4 `-T fields` (session id, epoch, partition, offset) on the same file (skipped when missing),
and the best time, MB/s and the tshark / (a) ratio. With --big it also writes a 1 GB capture and measures the
peak RSS of `fetchtool decode BIG --out DIR` (the child's own rusage, via wait4).
Targets (the performance issue): (a) >= 200 MB/s, tshark / (a) >= 3, peak RSS <= 300 MB on 1 GB.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import children_cpu, cpu_with_children  # noqa: E402
from make_bench_capture import BROKER_PORT, generate  # noqa: E402

from fetchtool.decoder import decode_capture  # noqa: E402
from fetchtool.exchange import Exchange  # noqa: E402

TSHARK = os.environ.get("FETCHTOOL_TSHARK", "/opt/tshark44/tshark")
TSHARK_FIELDS = ("kafka.fetch_session_id", "kafka.fetch_session_epoch", "kafka.partition_id", "kafka.offset")


def capture(workdir: Path, size_mb: float, seed: int) -> Path:
    path = workdir / f"bench-{size_mb:g}mb-seed{seed}.pcapng"
    if not path.exists():
        started = time.perf_counter()
        tmp = path.with_suffix(".tmp")
        stats = generate(tmp, size_mb, seed)
        tmp.rename(path)
        print(f"wrote {path} ({stats['exchanges']:,} exchanges) in {time.perf_counter() - started:.1f} s")
    return path


def run_in_process(path: Path, in_child: bool = False) -> tuple[float, float, dict]:
    gc.freeze()  # as the CLI does once its imports are done (fetchtool/cli.py)
    cpu = cpu_with_children()  # a large capture's reading runs in a forked child: count it
    here = time.process_time()
    started = time.perf_counter()
    run = decode_capture(path, in_child=in_child)
    exchanges = entries = 0
    for item in run:
        if isinstance(item, Exchange):
            exchanges += 1
            entries += len(item.request_partitions) + len(item.forgotten_partitions) + len(
                item.response_partitions or ())
    took = time.perf_counter() - started
    return took, cpu_with_children() - cpu, {"packets": run.report.packets, "exchanges": exchanges, "entries": entries,
                                             "here": time.process_time() - here}


def _timed_child(cmd: list[str]) -> tuple[float, float]:
    """Wall time and CPU time (the child and everything it waited for) of a command, output discarded."""
    cpu = children_cpu()
    started = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started, children_cpu() - cpu


def run_cli_jsonl(path: Path) -> tuple[float, float]:
    return _timed_child([sys.executable, "-m", "fetchtool.cli", "decode", str(path), "--format", "jsonl"])


def run_tshark(path: Path) -> tuple[float, float]:
    cmd = [TSHARK, "-r", str(path), "-d", f"tcp.port=={BROKER_PORT},kafka", "-T", "fields"]
    for f in TSHARK_FIELDS:
        cmd += ["-e", f]
    return _timed_child(cmd)


def peak_rss_parquet(path: Path, out_dir: Path) -> tuple[float, int]:
    """Wall time and peak RSS (bytes) of `fetchtool decode PATH --out DIR`, from the child's own rusage."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "fetchtool.cli", "decode", str(path), "--out", str(out_dir)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    took = time.perf_counter() - started
    if proc.returncode:
        raise SystemExit(f"fetchtool decode --out exited with {proc.returncode}")
    return took, usage.ru_maxrss * 1024  # Linux reports KiB


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=float, default=100.0)
    ap.add_argument("--path", type=Path, help="an existing capture to decode instead of a generated one")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "fetchtool-bench")
    ap.add_argument("--no-cli", action="store_true", help="skip (b), the fetchtool decode child process")
    ap.add_argument("--no-tshark", action="store_true")
    ap.add_argument("--big", action="store_true", help="also measure peak RSS of a Parquet decode of a big capture")
    ap.add_argument("--big-size-mb", type=float, default=1024.0)
    args = ap.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    path = args.path or capture(args.workdir, args.size_mb, args.seed)
    size = path.stat().st_size
    use_tshark = not args.no_tshark and os.access(TSHARK, os.X_OK)
    if not args.no_tshark and not use_tshark:
        print(f"tshark 4.4 not found at {TSHARK}: (c) skipped")

    times: dict[str, list[tuple[float, float]]] = {"a": [], "b": [], "c": [], "d": []}  # (wall, cpu) per run
    here: dict[str, list[float]] = {"a": [], "d": []}  # this process's CPU alone
    info: dict = {}
    load = os.getloadavg()[0]
    for _ in range(args.repeat):
        for key, in_child in (("a", False), ("d", True)):
            took, cpu, info = run_in_process(path, in_child)
            times[key].append((took, cpu))
            here[key].append(info["here"])
        if not args.no_cli:
            times["b"].append(run_cli_jsonl(path))
        if use_tshark:
            try:
                times["c"].append(run_tshark(path))
            except subprocess.CalledProcessError as exc:
                print(f"tshark failed (exit {exc.returncode}): (c) skipped")
                use_tshark = False

    mb = size / 1e6
    print(f"file: {path}  {mb:,.1f} MB  packets {info['packets']:,}  exchanges {info['exchanges']:,}  "
          f"partition entries {info['entries']:,}")

    print(f"load average before the runs: {load:.1f} on {os.cpu_count()} cores (wall times suffer when it is high; "
          f"CPU times much less)")

    def line(label: str, runs: list[tuple[float, float]]) -> tuple[float, float]:
        best = min(w for w, _ in runs)
        best_cpu = min(c for _, c in runs)
        all_runs = " ".join(f"{w:.3f}" for w, _ in runs)
        print(f"{label:<38} wall {best:6.3f} s {mb / best:6.1f} MB/s | cpu {best_cpu:6.3f} s {mb / best_cpu:6.1f} MB/s"
              f" | wall runs: {all_runs}")
        return best, best_cpu

    a, a_cpu = line("(a) decode_capture, every exchange", times["a"])  # cpu: both processes together
    line("(d) decode_capture, decoded in a child", times["d"])
    print(f"    CPU left in this process (the consumer's core): (a) {min(here['a']):.3f} s, "
          f"(d) {min(here['d']):.3f} s")
    if times["b"]:
        b, _ = line("(b) fetchtool decode --format jsonl", times["b"])
    if times["c"]:
        c, c_cpu = line("(c) tshark 4.4 -T fields", times["c"])
        print(f"tshark / (a): wall {c / a:.2f}x, cpu {c_cpu / a_cpu:.2f}x (target >= 3x)"
              + (f"   tshark / (b): wall {c / b:.2f}x" if times["b"] else ""))
    print(f"(a) throughput: wall {mb / a:.0f} MB/s, cpu {mb / a_cpu:.0f} MB/s (target >= 200 MB/s)")

    if args.big:
        big = capture(args.workdir, args.big_size_mb, args.seed)
        out_dir = Path(tempfile.mkdtemp(prefix="fetchtool-bench-out-"))
        try:
            took, rss = peak_rss_parquet(big, out_dir)
        finally:
            shutil.rmtree(out_dir, ignore_errors=True)
        bmb = big.stat().st_size / 1e6
        print(f"(big) fetchtool decode --out on {bmb:,.0f} MB: {took:.1f} s ({bmb / took:.0f} MB/s), "
              f"peak RSS {rss / 1e6:.0f} MB (target <= 300 MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
