"""Timing helpers for the benchmark scripts: CPU time beside wall time, as the machine may be shared."""

from __future__ import annotations

import gc
import resource
import time


def children_cpu() -> float:
    """CPU seconds (user + system) of the reaped child processes."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def cpu_with_children() -> float:
    """This process's CPU time plus its reaped children's: a large capture's reading runs in a forked child
    (capture/streams.py)."""
    return time.process_time() + children_cpu()


def best(fn, repeat: int = 3, cpu=time.process_time) -> tuple[float, float, object]:
    """(best wall s, best CPU s by the `cpu` clock, last result) over `repeat` runs, each after a collection."""
    wall = cpu_s = float("inf")
    out = None
    for _ in range(repeat):
        gc.collect()
        w, c = time.perf_counter(), cpu()
        out = fn()
        wall, cpu_s = min(wall, time.perf_counter() - w), min(cpu_s, cpu() - c)
    return wall, cpu_s, out
