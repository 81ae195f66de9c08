"""The analysis hears of each connection's end (decoder.DecodeRun.ended), so that it keeps state for the open
connections only. What it reports must not depend on it: a broker lost and back is read from every connection's
answers, the closed ones' too. (The savings estimate alone needs the ends, for a client port that a later
connection uses again: tests/spark/test_spark_engine.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from fetchtool.analysis.reports.json_report import render
from fetchtool.analysis.run import analyze_items
from fetchtool.commands.window import TimeWindow
from fetchtool.decoder import decode_capture
from fetchtool.exchange import Exchange

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
REAL = sorted(p for p in CAPTURES.rglob("*.pcap*") if "scenarios" not in p.parts)
RESTART = CAPTURES / "kafka" / "java-broker-restart.pcap"


def analysed(capture: Path, told: bool, window: TimeWindow = TimeWindow()) -> str:
    run = decode_capture([str(capture)], in_child=False)
    items = (it for it in run if window.keeps(it))
    return render(analyze_items(items, decode_report=run.report, ended=run.ended if told else None))


@pytest.mark.parametrize("capture", REAL, ids=lambda p: p.name)
def test_a_report_is_the_same_whether_or_not_connection_ends_are_told(capture):
    assert analysed(capture, told=True) == analysed(capture, told=False)


def test_a_broker_back_on_connections_that_closed_before_the_window_ends_is_still_back():
    # The real broker restart: its clients came back on new connections 19.6 s later, and closed them at the end
    # of the capture. A window ending before they closed hears of their ends after its last exchange; they
    # still show that the broker answered again.
    times = sorted(it.ts for it in decode_capture([str(RESTART)]) if isinstance(it, Exchange))
    window = TimeWindow(times[len(times) // 4], times[len(times) // 2])
    told = analysed(RESTART, told=True, window=window)
    assert "it answered again 19.6 s later, on new connections" in told
    assert told == analysed(RESTART, told=False, window=window)
