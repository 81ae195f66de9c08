"""The Spark engine against the embedded one, whole commands from the shell, side by side in one run.

    python benchmarks/bench_spark.py CAPTURE [--pieces 10 40] [--masters local[2] local[1] standalone]
                                             [--workdir /tmp/bench-spark] [--runs 1]

CAPTURE (pcap or pcapng, e.g. /work/bench/bench1g.pcap) is cut into rotated sets of 10 and 40 files, named as
`tcpdump -C` names them (cap.pcapng, cap.pcapng1, ...; made once in --workdir). For each set and engine the
command a user types is timed from the shell: `fetchtool analyze FILES --format json` (--engine spark --master M).
Figures:
  wall, peak RSS        /usr/bin/time of the whole command (max RSS: its largest process)
  CPU                   user + system of every process of the command, sampled from /proc every 0.1 s: the
                        Python driver, the JVM and the Python workers it starts (/usr/bin/time sees only the
                        processes waited for, not the JVM); split as "py" (driver and workers) and "jvm"
  driver RSS            the Python driver's own peak (VmHWM at exit)
  start-up              the same command on a 0.5 MB capture: the JVM, the session and the first jobs (with
                        the JVM's class archive, made first; once without it, for comparison)
  MB/s per core         capture size / (wall - start-up) / cores; the embedded engine counts as one core (the
                        target's basis), and beside it as the cores it keeps busy (its CPU over its wall, start-up
                        excluded: it decodes in a forked child while it analyses)
  stages                with --stages, the engine's own line per stage (--verbose): wall and CPU seconds of its
                        tasks, where a cluster's per-task overhead shows beside the start-up counted apart
Targets (issue #20): Spark local[2] per core >= 50% of the embedded engine's; local[2] <= 0.6x local[1];
the standalone cluster (a master and two one-core workers on 127.0.0.1) within 20% of local[2]; the driver's
peak RSS flat from 10 to 40 files. Every report is compared with the embedded engine's (byte for byte).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import tree_cpu

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "captures" / "kafka-python-tansu.pcap"
DRIVER = ("import atexit, sys\n"
          "def hwm():\n"
          "    for line in open('/proc/self/status'):\n"
          "        if line.startswith('VmHWM'): sys.stderr.write('driver-hwm-kb ' + line.split()[1] + '\\n')\n"
          "atexit.register(hwm)\n"
          "from fetchtool.__main__ import main\n"
          "sys.argv[0] = 'fetchtool'\n"
          "main()\n")


# -- rotated sets -------------------------------------------------------------------------------------------------
def _pcap_records(fh):
    header = fh.read(24)
    fmt = "<I" if header[:4] == b"\xd4\xc3\xb2\xa1" or header[:4] == b"\x4d\x3c\xb2\xa1" else ">I"
    yield header, True
    while rec := fh.read(16):
        caplen = struct.unpack(fmt, rec[8:12])[0]
        yield rec + fh.read(caplen), False


def _pcapng_blocks(fh):
    """(block bytes, part of every piece's header?) — SHB and IDBs head every piece; packets are cut."""
    order = "<"
    seen_packet = False
    while head := fh.read(8):
        btype, blen = struct.unpack(order + "II", head)
        if btype == 0x0A0D0D0A:
            magic = fh.read(4)
            order = "<" if magic == b"\x4d\x3c\x2b\x1a" else ">"
            blen = struct.unpack(order + "I", head[4:])[0]
            body = magic + fh.read(blen - 12)
        else:
            body = fh.read(blen - 8)
        is_packet = btype in (3, 6)
        seen_packet = seen_packet or is_packet
        yield head + body, not seen_packet and not is_packet


def rotate(capture: Path, pieces: int, out: Path) -> list[Path]:
    """CAPTURE cut into `pieces` files of about equal size, named as tcpdump -C names them."""
    out.mkdir(parents=True, exist_ok=True)
    names = [out / (capture.name + (str(i) if i else "")) for i in range(pieces)]
    stamp = out / ".complete"
    if stamp.exists():
        return names
    size = capture.stat().st_size
    with open(capture, "rb") as fh:
        ng = fh.read(4) == b"\x0a\x0d\x0d\x0a"
        fh.seek(0)
        blocks = _pcapng_blocks(fh) if ng else _pcap_records(fh)
        header = b""
        i, written, dst = 0, 0, None
        for data, is_header in blocks:
            if is_header:
                header += data
                continue
            if dst is None or (written >= (i + 1) * size / pieces and i + 1 < pieces):
                if dst is not None:
                    dst.close()
                    i += 1
                dst = open(names[i], "wb")
                dst.write(header)
            dst.write(data)
            written += len(data)
        if dst is not None:
            dst.close()
    stamp.touch()
    return names


# -- whole commands -----------------------------------------------------------------------------------------------
CLUSTER_PIDS: list[int] = []  # a standalone cluster's master and workers: its executors are their children


def run(args: list[str], env: dict, cwd: Path) -> dict:
    """One whole command from the shell: wall s, max RSS MB (/usr/bin/time), CPU s of its process tree (sampled),
    the driver's VmHWM, stdout digest."""
    with tempfile.NamedTemporaryFile() as timing, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(["/usr/bin/time", "-o", timing.name, "-f", "%e %M %U %S", sys.executable, "-c",
                                 DRIVER, *args], env=env, cwd=cwd, stdout=out, stderr=err)
        seen: dict[int, tuple[str, float]] = {}
        before: dict[int, tuple[str, float]] = {}
        for pid in CLUSTER_PIDS:  # what the cluster's processes had spent before the command
            tree_cpu(pid, before)
        while proc.poll() is None:
            tree_cpu(proc.pid, seen)
            for pid in CLUSTER_PIDS:
                tree_cpu(pid, seen)
            time.sleep(0.1)
        for pid, (kind, s) in before.items():
            if pid in seen:
                seen[pid] = (kind, seen[pid][1] - s)
        wall, rss, user, system = open(timing.name).read().split()[-4:]
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read().decode()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args[:6])}...: exit {proc.returncode}\n{stderr[-2000:]}")
    hwm = [int(line.split()[1]) for line in stderr.splitlines() if line.startswith("driver-hwm-kb")]
    cpu = {kind: sum(s for k, s in seen.values() if k == kind) for kind in ("py", "jvm")}
    # the driver's own figure is exact (waited for); the sampled one misses its last 0.1 s
    cpu["py"] = max(cpu["py"], float(user) + float(system))
    return {"wall": float(wall), "rss": int(rss) / 1024, "cpu": cpu["py"] + cpu["jvm"], "py": cpu["py"],
            "jvm": cpu["jvm"], "driver": hwm[-1] / 1024 if hwm else float("nan"),
            "digest": hashlib.sha256(stdout).hexdigest()[:12],
            "stages": [line for line in stderr.splitlines() if line.startswith("spark: ")]}


def analyze(files: list[Path], engine: list[str], env: dict, runs: int, stages: bool = False) -> dict:
    verbose = ["--verbose"] if stages and engine else []
    results = [run(["analyze", "--format", "json", *engine, *verbose, *map(str, files)], env, ROOT)
               for _ in range(runs)]
    best = min(results, key=lambda r: r["wall"])
    best["median"] = statistics.median(r["wall"] for r in results)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("capture", type=Path)
    ap.add_argument("--pieces", type=int, nargs="+", default=[10, 40])
    ap.add_argument("--masters", nargs="+", default=["local[2]", "local[1]", "standalone"])
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "bench-spark")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--stages", action="store_true", help="print the Spark engine's line per stage (--verbose)")
    args = ap.parse_args()

    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    cluster = None
    if "standalone" in args.masters:
        sys.path.insert(0, str(ROOT))
        from fetchtool.pipeline.spark_cluster import StandaloneCluster

        cluster = StandaloneCluster(Path(tempfile.mkdtemp(prefix="bench-spark-cluster-")))
    try:
        if cluster is not None:
            cluster.start(workers=2, cores=1, memory="1g")
            cluster.wait_for_workers(2)
            CLUSTER_PIDS.extend(p.pid for p in cluster.procs)
        masters = {m: (cluster.url if m == "standalone" and cluster else m) for m in args.masters}
        size = args.capture.stat().st_size / 1e6
        print(f"{args.capture} ({size:,.0f} MB); {os.cpu_count()} cores; best of {args.runs}", flush=True)
        # The JVM's class archive (fetchtool.pipeline.spark_classes) is made first, in the foreground: the first
        # Spark command would leave its maker running beside the timed ones.
        t = time.perf_counter()
        made = subprocess.run([sys.executable, "-m", "fetchtool.pipeline.spark_classes"], env=env, cwd=ROOT,
                              capture_output=True, text=True)
        archive_s = time.perf_counter() - t
        startup = {m: analyze([TINY], ["--engine", "spark", "--master", url], env, max(2, args.runs))
                   for m, url in masters.items()}
        first = next(iter(masters))
        cold = analyze([TINY], ["--engine", "spark", "--master", masters[first]], {**env, "FETCHTOOL_CACHE_DIR": ""},
                       max(2, args.runs))
        start = {m: r["wall"] for m, r in startup.items()}
        tiny_run = analyze([TINY], [], env, 1)
        tiny = tiny_run["wall"]
        print("start-up (the same command on a 0.5 MB capture): embedded "
              f"{tiny:.1f} s; " + "; ".join(f"{m} {r['wall']:.1f} s (CPU {r['cpu']:.0f} s)"
                                            for m, r in startup.items()), flush=True)
        print(f"  without the JVM's class archive: {first} {cold['wall']:.1f} s (CPU {cold['cpu']:.0f} s); "
              + (f"the archive made once in {archive_s:.0f} s" if made.returncode == 0
                 else f"no archive: {made.stderr.strip().splitlines()[-1:]}"), flush=True)
        for pieces in args.pieces:
            files = rotate(args.capture, pieces, args.workdir / f"{args.capture.name}-{pieces}")
            emb = analyze(files, [], env, args.runs)
            emb_rate = size / max(emb["wall"] - tiny, 1e-9)
            # The embedded engine decodes in a forked child beside the analysis: the cores it keeps busy
            emb_cores = max(1.0, (emb["cpu"] - tiny_run["cpu"]) / max(emb["wall"] - tiny, 1e-9))
            print(f"\n{pieces} files: embedded {emb['wall']:6.1f} s  {emb_rate:5.1f} MB/s per core  "
                  f"CPU {emb['cpu']:.0f} s ({emb_cores:.2f} cores busy)  peak RSS {emb['rss']:,.0f} MB  "
                  f"report {emb['digest']}", flush=True)
            walls = {}
            for m, url in masters.items():
                r = analyze(files, ["--engine", "spark", "--master", url], env, args.runs, args.stages)
                cores = 2 if m in ("local[2]", "standalone") else 1
                net = max(r["wall"] - start[m], 1e-9)
                walls[m] = net
                rate = size / net / cores
                same = "== embedded" if r["digest"] == emb["digest"] else "DIFFERS from embedded"
                print(f"  {m:10} {r['wall']:6.1f} s (start-up {start[m]:.1f} s + {net:5.1f} s)  {rate:5.1f} MB/s "
                      f"per core = {rate / emb_rate:4.0%} of embedded ({rate * emb_cores / emb_rate:4.0%} of its "
                      f"{emb_cores:.2f} busy cores')  CPU {r['cpu']:.0f} s (py {r['py']:.0f} jvm "
                      f"{r['jvm']:.0f})  peak RSS {r['rss']:,.0f} MB  driver "
                      f"{r['driver']:,.0f} MB  report {same}", flush=True)
                for line in r["stages"]:
                    print(f"             {line}", flush=True)
            print(f"  load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
            if "local[2]" in walls and "local[1]" in walls:
                print(f"  local[2] / local[1] = {walls['local[2]'] / walls['local[1]']:.2f} (target <= 0.6)")
            if "local[2]" in walls and "standalone" in walls:
                print(f"  standalone / local[2] = {walls['standalone'] / walls['local[2]']:.2f} (target <= 1.2)")
    finally:
        if cluster is not None:
            cluster.stop()
            shutil.rmtree(cluster.root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
