"""--since / --until give the same analysis on both engines: the Spark stages keep the items the embedded
engine's reading keeps, and see the same end of capture (the latest exchange inside the window)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fetchtool.analysis.reports.json_report import render
from fetchtool.analysis.run import analyze_items
from fetchtool.commands.window import TimeWindow
from fetchtool.decoder import decode_capture
from fetchtool.exchange import Exchange
from fetchtool.pipeline.spark import analyze_spark

pytestmark = pytest.mark.spark

KAFKA = Path(__file__).resolve().parents[2] / "captures" / "kafka"


def embedded(capture: Path, window: TimeWindow) -> str:
    run = decode_capture([str(capture)])
    items = [it for it in run if window.keeps(it)]
    return render(analyze_items(items, decode_report=run.report))


@pytest.mark.parametrize("name", ["java-evictions.pcap", "java-broker-restart.pcap", "platformatic-churn.pcap"])
def test_a_window_gives_both_engines_the_same_report(spark, name):
    capture = KAFKA / name
    times = sorted(it.ts for it in decode_capture([str(capture)]) if isinstance(it, Exchange))
    window = TimeWindow(times[len(times) // 4], times[len(times) // 2])
    expected = embedded(capture, window)
    assert render(analyze_spark([str(capture)], spark=spark, window=window)) == expected
    assert expected != embedded(capture, TimeWindow())  # the window changed the report
