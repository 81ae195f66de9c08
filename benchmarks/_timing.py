"""Timing helpers for the benchmark scripts: CPU time beside wall time, as the machine may be shared."""

from __future__ import annotations

import gc
import os
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


TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100  # clock ticks per second in /proc


def tree_cpu(root: int, seen: dict[int, tuple[str, float]]) -> None:
    """Note the CPU seconds so far (user + system) of `root` and every process under it, read from /proc:
    pid -> (kind: "jvm" or "py", s), in the order the processes were first seen. Sampled, so a process's last
    reading misses what it spent after it."""
    children: dict[int, list[int]] = {}
    stats: dict[int, tuple[str, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                text = fh.read()
        except OSError:
            continue
        comm = text[text.index("(") + 1:text.rindex(")")]
        fields = text[text.rindex(")") + 2:].split()
        pid = int(entry)
        children.setdefault(int(fields[1]), []).append(pid)
        stats[pid] = ("jvm" if comm == "java" else "py", (int(fields[11]) + int(fields[12])) / TICK)
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            seen[pid] = stats[pid]
        todo.extend(children.get(pid, ()))
