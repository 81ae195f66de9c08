"""Benchmark: `fetchtool replay` of a capture with many short connections (issue #18, item 6).

Writes, with fetchtool's own synthetic world (the session engine answers, real wire bytes in a pcap), a capture
where N clients each connect, make one full fetch that creates a session, two incremental fetches, and close.
Then runs the whole command from the shell under `/usr/bin/time -v` and prints requests/s (requests over the
command's wall time), wall and CPU time, the replay phase's own duration, max RSS and the load average (a shared
machine's load stretches the wall time; the CPU time does not move with it).

    python benchmarks/bench_replay_connections.py 1000 2000 5000 10000               # embedded broker, as fast as possible
    python benchmarks/bench_replay_connections.py 10000 --speed 20                    # paced by the captured clock
    python benchmarks/bench_replay_connections.py 10000 --broker 127.0.0.1:9092       # a running broker
    python benchmarks/bench_replay_connections.py 3000 --write-only /tmp/short.pcap   # just the capture

The captured broker's cache holds every session (slots = N), and the replay's embedded broker is given the same
(--cache-slots N), so every connection's full fetch creates a session in the capture and in the replay.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fetchtool.synth.world import JavaLikeClient, World

GAP_S = 0.005  # between one connection's close and the next one's SYN, in the capture


def write_capture(path: Path, connections: int, incremental: int = 2, partitions: int = 3) -> None:
    """N short, non-overlapping connections, each: full fetch (new session), `incremental` fetches, close."""
    w = World(path)
    try:
        broker = w.broker(slots=max(1000, connections), shards=1)
        parts = [("orders", p) for p in range(partitions)]
        for tp in parts:
            broker.produce(*tp, 10)
        for n in range(connections):
            ip = f"10.{1 + n // 60000}.{(n // 250) % 240}.{1 + n % 250}"
            conn = w.connect(broker, ip, 20000 + n % 40000, f"short-{n % 50}")
            client = JavaLikeClient(conn, parts)
            for _ in range(1 + incremental):
                client.poll()
            conn.close()
            w.advance(GAP_S)
    finally:
        w.close()


def run_replay(capture: Path, connections: int, extra: list[str]) -> dict:
    # the installed command, as a user runs it; next to this Python when its environment is not on PATH
    fetchtool = shutil.which("fetchtool") or str(Path(sys.executable).with_name("fetchtool"))
    cmd = ["/usr/bin/time", "-v", fetchtool, "replay", str(capture), "--format", "json"]
    if "--broker" not in extra:
        cmd += ["--cache-slots", str(max(1000, connections)), "--cache-shards", "1"]
    cmd += extra
    print("$ " + " ".join(cmd[2:]), flush=True)
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - started
    if proc.returncode:
        print(proc.stderr[-2000:], file=sys.stderr)
        return {"connections": connections, "failed": proc.returncode}
    doc = json.loads(proc.stdout)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    cpu = sum(float(m) for m in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", proc.stderr))
    totals = doc["totals"] if "totals" in doc else doc.get("replay", {}).get("totals", {})
    return {"connections": connections, "wall_s": round(wall, 2), "requests": totals.get("requests"),
            "responses": totals.get("responses"), "sessions_created": totals.get("sessions_created"),
            "requests_per_s": round((totals.get("requests") or 0) / wall, 1), "cpu_s": round(cpu, 2),
            "replay_phase_s": doc.get("elapsed_s"), "load_average": round(os.getloadavg()[0], 2),
            "max_rss_mb": round(int(rss.group(1)) / 1024, 1) if rss else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("connections", type=int, nargs="+")
    ap.add_argument("--write-only", type=Path, help="write the capture of the first N here and stop")
    ap.add_argument("--captures", type=Path, help="keep the captures in this folder (and reuse them there)")
    ap.add_argument("--speed", type=float, help="pace by the captured clock this many times faster "
                    "(default: --as-fast-as-possible)")
    ap.add_argument("--broker", help="HOST:PORT of a running broker (with --create-topics)")
    args = ap.parse_args()
    if args.write_only:
        write_capture(args.write_only, args.connections[0])
        return
    extra = ["--speed", str(args.speed)] if args.speed else ["--as-fast-as-possible"]
    if args.broker:
        extra += ["--broker", args.broker, "--create-topics"]
    with tempfile.TemporaryDirectory(prefix="replay-bench-") as tmp:
        folder = args.captures or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for n in args.connections:
            capture = folder / f"short-{n}.pcap"
            if not capture.exists():
                write_capture(capture, n)
            print(f"capture: {n:,} connections, {os.path.getsize(capture) / 1e6:.1f} MB", flush=True)
            print(json.dumps(run_replay(capture, n, extra)), flush=True)


if __name__ == "__main__":
    main()
