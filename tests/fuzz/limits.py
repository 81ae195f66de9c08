"""A CPU-time limit per fuzz input: an input that makes the code under test spin is a finding like a crash."""

from __future__ import annotations

import signal
from typing import Callable


class Hang(Exception):
    """The input took more CPU time than allowed."""


def within_cpu(fn: Callable[[bytes], None], data: bytes, seconds: float) -> None:
    """fn(data), raising Hang after `seconds` of this process's CPU time. CPU time, not wall time: a busy machine
    does not make an input slow. SIGVTALRM, not SIGALRM, which libFuzzer's own -timeout uses."""

    def too_slow(signum, frame) -> None:
        raise Hang(f"more than {seconds:g} s of CPU on one input")

    previous = signal.signal(signal.SIGVTALRM, too_slow)
    signal.setitimer(signal.ITIMER_VIRTUAL, seconds)
    try:
        fn(data)
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, previous)


_CHILD = """
import resource, sys
from tests.fuzz import targets
data = sys.stdin.buffer.read()
fn = targets.TARGETS[sys.argv[1]]
used = resource.getrusage(resource.RUSAGE_SELF)
used = int(used.ru_utime + used.ru_stime) + 1
resource.setrlimit(resource.RLIMIT_CPU, (used + int(sys.argv[2]), used + int(sys.argv[2]) + 1))
fn(data)
"""


def in_child(target: str, data: bytes, cpu_seconds: int, memory_bytes: int = 2 << 30) -> tuple[int, str]:
    """Run a target on `data` in a child process limited to `cpu_seconds` of CPU (after its imports) and
    `memory_bytes` of address space: an input that spins or balloons (a broker asked for millions of
    partitions) fails there instead of stalling the suite. Returns (exit status, stderr); -SIGXCPU / -SIGKILL
    when the limit struck."""
    import resource
    import subprocess
    import sys
    from pathlib import Path

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))

    proc = subprocess.run([sys.executable, "-c", _CHILD, target, str(cpu_seconds)], input=data, capture_output=True,
                          cwd=Path(__file__).resolve().parents[2], preexec_fn=limit_memory, timeout=600)
    return proc.returncode, proc.stderr.decode("utf-8", "replace")
