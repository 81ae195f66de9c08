"""Savings estimate: speed on a big capture, and accuracy against `fetchtool broker` with sessions.

    python benchmarks/bench_savings.py [CAPTURE]    # default: /tmp/bench_savings.pcapng (made if missing, ~100 MB)

Prints: decode time, estimator CPU time per partition row, analyze MB/s with and without the savings tap, and
for a sessionless workload run against the embedded broker (300 and 3,000 partitions) the estimated incremental
bytes vs the bytes a session-using run of the same workload really sent and received.
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import best

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "savings"))


class _NoSavings:
    """Stands in for the estimator to time analyze without it."""

    def feed(self, ex) -> None:
        return None

    def result(self):
        return self

    def to_json(self) -> dict:
        return {}


def speed(path: str) -> None:
    from fetchtool.analysis import run
    from fetchtool.analysis.savings.estimator import SavingsEstimator
    from fetchtool.decoder import decode_capture

    gc.freeze()   # as the CLI does at start-up
    mb = os.path.getsize(path) / 1e6
    t = time.process_time()
    exchanges = [e for e in decode_capture([path]) if hasattr(e, "api_key")]
    decode_s = time.process_time() - t
    rows = sum(len(e.request_partitions) + len(e.response_partitions or ()) for e in exchanges)

    def estimate_all() -> None:
        est = SavingsEstimator()
        for e in exchanges:
            est.feed(e)

    wall, cpu, _ = best(estimate_all)
    print(f"{path}: {mb:.1f} MB, {len(exchanges):,} exchanges, {rows:,} partition rows")
    print(f"  decode {decode_s:.2f} s CPU (this process); savings estimator {cpu:.3f} s CPU, {wall:.3f} s wall "
          f"= {cpu / max(rows, 1) * 1e6:.2f} us/row CPU")
    real = run.SavingsEstimator
    for label, estimator in (("without savings", _NoSavings), ("with savings", real)):
        run.SavingsEstimator = estimator
        try:
            wall, cpu, _ = best(lambda: run.analyze_capture([path]), 2)
        finally:
            run.SavingsEstimator = real
        print(f"  analyze {label}: {wall:.2f} s wall ({mb / wall:.0f} MB/s), {cpu:.2f} s CPU (this process)")


def accuracy() -> None:
    from broker_workload import run as run_workload
    from broker_workload import schedule

    from fetchtool.analysis.savings.estimator import estimate
    from fetchtool.decoder import decode_capture

    for partitions, changes in ((300, 5), (3000, 20)):
        plan = schedule(rounds=30, partitions=partitions, changes_per_round=changes)
        with tempfile.TemporaryDirectory() as d:
            pcap = Path(d) / "plain.pcap"
            run_workload("orders", partitions, plan, sessions=False, pcap_path=pcap)  # writes the capture
            sess = run_workload("orders", partitions, plan, sessions=True)
            tot = estimate(decode_capture([pcap])).to_json()["total"]
        est = tot["incremental_request_bytes"] + tot["incremental_response_bytes"]
        real = sess["request_bytes"] + sess["response_bytes"]
        print(f"  {partitions} partitions, {changes} changes/fetch, 30 fetches: sessionless {tot['actual_bytes']:,} B;"
              f" estimated with sessions {est:,} B; measured with sessions {real:,} B "
              f"({(est - real) / real * 100:+.2f}%)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("capture", nargs="?", default="/tmp/bench_savings.pcapng",
                    help="capture to time the estimator on (made with make_bench_capture.py if missing)")
    path = ap.parse_args().capture
    if not os.path.exists(path):
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_bench_capture.py"), path], check=True,
                       stdout=subprocess.DEVNULL)
    speed(path)
    print("accuracy against fetchtool broker (embedded, loopback):")
    accuracy()


if __name__ == "__main__":
    main()
