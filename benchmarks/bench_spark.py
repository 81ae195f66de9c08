"""Spark engine vs polars engine on a directory of captures: wall time, where the time goes, same report or not.

    python benchmarks/bench_spark.py DIR [--masters local[1] local[2]] [--no-polars]

DIR: capture files (e.g. made with benchmarks/make_bench_capture.py with several --seed values). For each Spark
master the session start-up is timed apart from the analysis, and the analysis is split by stage:
  files_and_counts_s            stage 0: list files, count packets per file (frame offsets, rotated sets)
  segments_reassembly_decode_s  stages 1-2: segments per file, shuffle by flow, reassembly + Kafka decode per flow
  per_broker_analysis_s         stage 3: shuffle by broker, tracker + findings + savings per broker
  driver_merge_s                merging the per-broker parts on the driver
The polars engine is `analyze_capture` (one process, streaming). Reports are compared as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--masters", nargs="+", default=["local[1]", "local[2]"])
    ap.add_argument("--no-polars", action="store_true")
    args = ap.parse_args()

    from fetchtool.pipeline.spark import analyze_spark, expand_paths, spark_session

    files = expand_paths([args.dir])
    size = sum(os.path.getsize(f) for f in files)
    print(f"{len(files)} files, {size / 1e6:,.0f} MB in {args.dir}; {os.cpu_count()} cores", flush=True)
    reports = {}
    if not args.no_polars:
        from fetchtool.analysis.run import analyze_capture

        t = time.perf_counter()
        a = analyze_capture(files)
        wall = time.perf_counter() - t
        reports["polars"] = json.loads(json.dumps(a.to_json()))
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"polars: {wall:6.1f} s  ({size / 1e6 / wall:,.0f} MB/s; {a.capture.exchanges:,} exchanges; "
              f"peak RSS {rss:,.0f} MB)", flush=True)
    for master in args.masters:
        t = time.perf_counter()
        spark = spark_session(master)
        start = time.perf_counter() - t
        timings: dict = {}
        t = time.perf_counter()
        a = analyze_spark(files, spark=spark, timings=timings)
        wall = time.perf_counter() - t
        reports[master] = json.loads(json.dumps(a.to_json()))
        same = "" if "polars" not in reports else (
            "  report == polars" if reports[master] == reports["polars"] else "  REPORT DIFFERS from polars")
        stages = "  ".join(f"{k} {v:.1f}" for k, v in timings.items())
        print(f"spark {spark.sparkContext.master} (parallelism {spark.sparkContext.defaultParallelism}): start "
              f"{start:.1f} s (JVM reused after the first) + analysis {wall:6.1f} s ({size / 1e6 / wall:,.0f} MB/s){same}\n"
              f"    {stages}", flush=True)
        spark.stop()
        time.sleep(2)


if __name__ == "__main__":
    sys.exit(main())
