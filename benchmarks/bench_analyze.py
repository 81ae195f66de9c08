"""Analyze end to end (decode + tracking + findings + savings) on a capture; prints MB/s, CPU time and peak memory.

    python benchmarks/make_bench_capture.py /tmp/bench.pcapng
    python benchmarks/bench_analyze.py /tmp/bench.pcapng [--repeat 3]

Figures (best of --repeat runs; the machine may be shared, so CPU time is printed next to wall time):
- decode only: the decoder alone, streaming;
- analyze end to end: `analyze_capture`, streaming, as `fetchtool analyze` runs it;
- after decode: `analyze_items` over the already decoded exchanges (tracking, findings, totals and savings
  without the decoder), and the savings estimator alone over the same exchanges.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource

from _timing import best, cpu_with_children

from fetchtool.analysis.run import analyze_capture, analyze_items
from fetchtool.analysis.savings.estimator import SavingsEstimator
from fetchtool.decoder import decode_capture
from fetchtool.exchange import Exchange


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    gc.freeze()   # as the CLI does at start-up (fetchtool/cli.py): imported modules are not re-walked by the collector
    path, repeat = args.capture, args.repeat
    size = os.path.getsize(path) / 1e6
    d_wall, d_cpu, n = best(lambda: sum(1 for _ in decode_capture([path])), repeat, cpu_with_children)
    a_wall, a_cpu, a = best(lambda: analyze_capture([path]), repeat, cpu_with_children)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024   # streaming runs only, so far
    run = decode_capture([path])
    items = list(run)
    exchanges = [e for e in items if isinstance(e, Exchange)]

    def savings_only() -> None:
        est = SavingsEstimator()
        for e in exchanges:
            est.feed(e)
        est.result().to_json()

    p_wall, p_cpu, _ = best(lambda: analyze_items(items, decode_report=run.report), repeat, cpu_with_children)
    s_wall, s_cpu, _ = best(savings_only, repeat, cpu_with_children)
    rows = sum(len(e.request_partitions) + len(e.response_partitions or ()) for e in exchanges)
    print(f"{path}: {size:.1f} MB, {n} items, {rows:,} partition rows, {len(a.sessions)} sessions, "
          f"{len(a.findings)} findings (best of {repeat})")
    print(f"decode only: {d_wall:.2f} s wall ({size / d_wall:.0f} MB/s), {d_cpu:.2f} s CPU")
    print(f"analyze end to end: {a_wall:.2f} s wall ({size / a_wall:.0f} MB/s), {a_cpu:.2f} s CPU; "
          f"minus decode {a_wall - d_wall:.2f} s wall, {a_cpu - d_cpu:.2f} s CPU; peak RSS {rss:.0f} MB (streaming)")
    print(f"after decode (exchanges in memory): analyze {p_wall:.3f} s wall, {p_cpu:.3f} s CPU; "
          f"of which savings {s_wall:.3f} s wall, {s_cpu:.3f} s CPU ({s_cpu / max(rows, 1) * 1e6:.2f} us/row)")


if __name__ == "__main__":
    main()
