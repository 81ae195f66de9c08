"""Analyze end to end (decode + tracking + findings) on a capture; prints MB/s and peak memory.

    python benchmarks/make_bench_capture.py /tmp/bench.pcapng
    python benchmarks/bench_analyze.py /tmp/bench.pcapng
"""

from __future__ import annotations

import os
import resource
import sys
import time

from fetchtool.analysis.run import analyze_capture
from fetchtool.decoder import decode_capture


def main(path: str) -> None:
    size = os.path.getsize(path) / 1e6
    t0 = time.perf_counter()
    n = sum(1 for _ in decode_capture([path]))
    decode = time.perf_counter() - t0
    t0 = time.perf_counter()
    a = analyze_capture([path])
    total = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{path}: {size:.1f} MB, {n} items, {len(a.sessions)} sessions, {len(a.findings)} findings")
    print(f"decode only: {decode:.2f} s ({size / decode:.0f} MB/s)")
    print(f"analyze end to end: {total:.2f} s ({size / total:.0f} MB/s); tracking+findings overhead "
          f"{total - decode:.2f} s; peak RSS {rss:.0f} MB")


if __name__ == "__main__":
    main(sys.argv[1])
