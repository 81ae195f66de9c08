"""Benchmark: replayed fetch requests per second against the embedded broker (`fetchtool replay`).

Replays a synthetic workload (the one bench_simulate.py builds) or a capture --as-fast-as-possible against the
in-process fetchtool broker over real loopback sockets, and also at a fixed --speed. Prints figures only.

    python benchmarks/bench_replay.py [--clients 40] [--fetches 100] [--capture FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_simulate import workload  # noqa: E402

from fetchtool.replay.driver import ReplayOptions, percentile, replay  # noqa: E402
from fetchtool.replay.plan import build_plan  # noqa: E402
from fetchtool.replay.simulate import SimConfig  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=40)
    ap.add_argument("--fetches", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--capture")
    ap.add_argument("--speed", type=float, default=20.0)
    args = ap.parse_args()
    if args.capture:
        from fetchtool.replay.loading import load_plan

        plan, _ = load_plan([args.capture])
    else:
        plan = build_plan(workload(args.clients, args.fetches, args.partitions))
    print(f"plan: {plan.requests:,} fetches, {len(plan.streams)} streams, {plan.duration_ms / 1000:,.1f} s captured")
    for label, options in (
        ("as-fast-as-possible", ReplayOptions(config=SimConfig(1000, 8, 120_000), as_fast=True)),
        (f"speed {args.speed:g}", ReplayOptions(config=SimConfig(1000, 8, 120_000), speed=args.speed)),
    ):
        run = asyncio.run(replay(plan, options))
        totals = run.totals()
        sent = totals.requests
        rtts = [x for r in run.streams for x in r.rtts_ms]
        print(f"replay {label}: {sent:,} requests in {run.elapsed_s:.2f} s = {sent / run.elapsed_s:,.0f} requests/s;"
              f" rtt p50 {percentile(rtts, 0.5)} ms p99 {percentile(rtts, 0.99)} ms; errors {dict(totals.errors)};"
              f" sessions {totals.sessions_created}")


if __name__ == "__main__":
    main()
