"""Benchmark: simulated fetch exchanges per second through the session engine (`fetchtool simulate`).

Builds a synthetic workload of decoded exchanges (session consumers, Sarama-style (0,0) clients and sessionless
clients against a few brokers), plans it once, then simulates it with a cache that thrashes and with one that
does not: each config in one process, each config with its brokers spread over the cores, and all of them
through simulate_many (one process per core). Prints figures; no assertions. Target: >= 200,000 simulated
exchanges per second per configuration.

    python benchmarks/bench_simulate.py [--clients 600] [--fetches 400] [--partitions 8] [--capture FILE]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from fetchtool.exchange import Exchange, RequestPartition, ResponsePartition
from fetchtool.replay.plan import LATER, build_plan
from fetchtool.replay.simulate import SimConfig, simulate, simulate_many


def workload(clients: int, fetches: int, partitions: int, brokers: int = 3) -> list[Exchange]:
    out = []
    for c in range(clients):
        kind = c % 10  # 8 in 10 session consumers, 1 Sarama-style, 1 sessionless
        broker = f"10.0.1.{c % brokers}:9092"
        client = f"10.0.2.{c // 250}:{30000 + c}"
        topic = f"topic-{c % 20}"
        parts = [RequestPartition(topic, None, p, 0, 1048576, -1, 0, -1) for p in range(partitions + c % 5)]
        every = 0.5 + (c % 7) * 0.1
        sid = 1000 + c
        for n in range(fetches):
            t = 1_700_000_000.0 + (c % 50) * 0.01 + n * every
            if kind == 9:
                meta, sent = (0, -1), parts
            elif kind == 8 or n == 0:
                meta, sent = (0, 0), parts
            else:
                meta, sent = (sid, n), parts[n % len(parts):n % len(parts) + 1]
            data = n % 3 == 0
            resp = tuple(
                ResponsePartition(p.topic, None, p.partition, 0, 10 * n, 10 * n, 0, -1, -1, -1,
                                  2000 if data else 0, int(data), 10 * int(data), "none" if data else None)
                for p in sent
            )
            out.append(Exchange(
                "bench.pcap", c, None, None, t, t + 0.003, client, broker, 1, 12, n, f"app-{c % 30}", None, -1,
                meta[0], meta[1], 500, 1, 52428800, 0, "", 0, sid if meta[1] >= 0 else 0, 0,
                60 + 33 * len(sent), 30 + 37 * len(resp) + sum(r.records_bytes for r in resp), tuple(sent), (),
                resp,
            ))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=600)
    ap.add_argument("--fetches", type=int, default=400)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--capture", help="a pcap/pcapng to plan instead of the synthetic workload")
    args = ap.parse_args()
    t0 = time.perf_counter()
    if args.capture:
        from fetchtool.replay.loading import load_plan

        plan, _ = load_plan([args.capture])
        source = args.capture
    else:
        exchanges = workload(args.clients, args.fetches, args.partitions)
        t1 = time.perf_counter()
        print(f"workload: {len(exchanges):,} exchanges generated in {t1 - t0:.2f} s")
        t0 = time.perf_counter()
        plan = build_plan(exchanges)
        source = "synthetic"
    t_plan = time.perf_counter() - t0
    n = plan.requests
    print(f"plan ({source}): {n:,} fetches, {len(plan.streams)} streams, {len(plan.brokers)} brokers "
          f"in {t_plan:.2f} s ({n / t_plan:,.0f} exchanges/s)")
    configs = [SimConfig(120, 8, 120_000), SimConfig(1000, 8, 120_000), SimConfig(1000, 1, 120_000)]
    # Wall-clock figures swing with whatever else runs on the machine; the CPU-time figure is this process's own.
    alone = {}
    for config in configs:
        t0, c0 = time.perf_counter(), time.process_time()
        result = alone[config] = simulate(plan, config)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        print(f"simulate {config}, 1 process: {n / dt:,.0f} exchanges/s ({dt:.2f} s; {n / dc:,.0f}/s of CPU time);"
              f" created {result.totals.sessions_created:,} evictions {result.totals.evictions:,}"
              f" errors {dict(result.totals.errors)} incremental {result.totals.incremental_share:.0%}")
    # As `fetchtool simulate` runs it: a plan that makes each step's reads while simulating, from its spill
    # (build_plan with_reads=LATER), so that memory does not grow with the capture.
    if not args.capture:
        with tempfile.TemporaryFile() as spill:
            t0 = time.perf_counter()
            later = build_plan(exchanges, spill, LATER)
            dt = time.perf_counter() - t0
            print(f"plan with reads made later: {n / dt:,.0f} exchanges/s ({dt:.2f} s)")
            for config in configs:
                t0, c0 = time.perf_counter(), time.process_time()
                result = simulate(later, config)
                dt, dc = time.perf_counter() - t0, time.process_time() - c0
                same = [t.to_json() for t in result.streams] == [t.to_json() for t in alone[config].streams]
                print(f"simulate {config}, 1 process, reads made as it goes: {n / dt:,.0f} exchanges/s ({dt:.2f} s;"
                      f" {n / dc:,.0f}/s of CPU time; {'same result' if same else 'DIFFERENT RESULT'})")
    # One configuration with its brokers spread over the cores (the result is the same). CPU time here is the
    # busiest worker's, which bounds the wall time on an idle machine.
    for config in configs:
        t0, k0 = time.perf_counter(), os.times()
        split = simulate(plan, config, processes=None)
        dt, k1 = time.perf_counter() - t0, os.times()
        busy = (k1.children_user + k1.children_system) - (k0.children_user + k0.children_system)
        same = [t.to_json() for t in split.streams] == [t.to_json() for t in alone[config].streams]
        print(f"simulate {config}, brokers on {os.cpu_count()} processes: {n / dt:,.0f} exchanges/s ({dt:.2f} s;"
              f" workers' CPU {busy:.2f} s; {'same result' if same else 'DIFFERENT RESULT'})")
    t0 = time.perf_counter()
    simulate_many(plan, configs)
    dt = time.perf_counter() - t0
    print(f"simulate_many, {len(configs)} configs on {min(len(configs), os.cpu_count() or 1)} processes: "
          f"{len(configs) * n / dt:,.0f} exchanges/s in all ({dt:.2f} s)")


if __name__ == "__main__":
    main()
