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
