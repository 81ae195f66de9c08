"""A reader that wants some flows of a capture (the Spark engine's flow buckets) asks iter_segments for them:
it gets exactly the segments it would have kept by filtering every segment afterwards, in the same order, and the
capture statistics still count every packet of the file."""

from __future__ import annotations

import ipaddress
import zlib
from pathlib import Path

from fetchtool.capture.packets import CaptureStats, iter_segments

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
MANY_FLOWS = CAPTURES / "kafka" / "java-evictions.pcap"  # 30 TCP flows, a real Kafka 4.3 broker and Java client


def _raw(endpoint) -> bytes:
    return ipaddress.ip_address(endpoint.ip).packed


def test_a_reader_that_keeps_some_flows_gets_exactly_their_segments():
    def wanted(addrs: bytes, sport: int, dport: int) -> bool:  # about half the directions, from the raw fields
        return zlib.crc32(addrs + sport.to_bytes(2, "big") + dport.to_bytes(2, "big")) % 2 == 0

    every_stats, kept_stats = CaptureStats(), CaptureStats()
    every = list(iter_segments(MANY_FLOWS, every_stats))
    kept = list(iter_segments(MANY_FLOWS, kept_stats, keep_flow=wanted))

    filtered_after = [s for s in every if wanted(_raw(s.src) + _raw(s.dst), s.src.port, s.dst.port)]
    assert 0 < len(kept) < len(every)
    assert kept == filtered_after
    assert kept_stats == every_stats  # packets, bytes, TCP segments and warnings of the whole file


def test_the_filter_is_asked_once_per_direction_of_each_flow():
    asked: list[tuple] = []

    def keep_none(addrs: bytes, sport: int, dport: int) -> bool:
        asked.append((addrs, sport, dport))
        return False

    every = list(iter_segments(MANY_FLOWS))
    assert list(iter_segments(MANY_FLOWS, keep_flow=keep_none)) == []
    directions = {(_raw(s.src) + _raw(s.dst), s.src.port, s.dst.port) for s in every}
    assert len(directions) > 30
    assert sorted(asked) == sorted(directions)
