"""Helpers for the capture tests: run a file through iter_segments + TcpReassembler and collect the streams."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import pytest

from fetchtool.capture.events import ConnectionClosed, Endpoint, StreamData, StreamGap
from fetchtool.capture.packets import CaptureStats, iter_segments
from fetchtool.capture.reassembly import TcpReassembler

CLIENT = Endpoint("10.0.0.1", 40000)
BROKER = Endpoint("10.0.0.2", 9092)
CLIENT6 = Endpoint("fd00::1", 40000)
BROKER6 = Endpoint("fd00::2", 9092)
T0 = 1_700_000_000.0


@dataclass
class Capture:
    """What the capture layer made of a file: per (conn, sender) the delivered bytes, plus gaps and closes."""

    stats: CaptureStats
    segments: list
    data: dict = field(default_factory=lambda: defaultdict(bytearray))
    gaps: list = field(default_factory=list)
    closed: list = field(default_factory=list)
    events: list = field(default_factory=list)

    def stream(self, sender: Endpoint, conn: int = 1) -> bytes:
        return bytes(self.data[(conn, sender)])


def reassemble_events(segments, capture: Capture) -> Capture:
    r = TcpReassembler()
    events = []
    for seg in segments:
        events.extend(r.feed(seg))
    if segments:
        events.extend(r.finish(segments[-1].frame, segments[-1].ts))
    for ev in events:
        if isinstance(ev, StreamData):
            capture.data[(ev.conn, ev.src)] += ev.data
        elif isinstance(ev, StreamGap):
            capture.gaps.append(ev)
        elif isinstance(ev, ConnectionClosed):
            capture.closed.append(ev)
    capture.events = events
    return capture


def read_capture(path) -> Capture:
    stats = CaptureStats()
    segments = list(iter_segments(path, stats))
    return reassemble_events(segments, Capture(stats, segments))


@pytest.fixture
def payloads():
    """Deterministic, position-dependent bytes (so misordered or duplicated bytes cannot go unnoticed)."""
    def make(n: int, salt: int = 0) -> bytes:
        return bytes((i * 7 + i // 251 + salt) & 0xFF for i in range(n))
    return make
