"""The real fetchtool command line, run as a support engineer runs it: a subprocess, output piped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CAPTURES = REPO / "captures"
REBALANCE = CAPTURES / "kafka" / "java-rebalance.pcap"      # Apache Kafka 4.3.1, port 46129, 424 fetches
CHURN = CAPTURES / "kafka" / "platformatic-churn.pcap"      # @platformatic/kafka 2.2.3 refused again and again

COMMANDS = ["analyze", "decode", "sessions", "savings", "simulate", "replay", "broker", "synth"]
# The commands that read captures, with the arguments that make them report quickly.
READERS = {"analyze": [], "decode": [], "sessions": [], "savings": [], "simulate": [],
           "replay": ["--as-fast-as-possible"]}


def fetchtool(*args, env: dict | None = None, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fetchtool", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, **kw)


def popen(*args, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "fetchtool", *map(str, args)], text=True, **kw)
