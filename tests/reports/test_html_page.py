"""The HTML page as a file: self-contained, of a reasonable size, its vendored chart library shipped with the
package, and its embedded data unable to end the script element it sits in."""

from __future__ import annotations

import json
import re
from fnmatch import fnmatch
from importlib.resources import files
from pathlib import Path

import pytest
import tomllib

from fetchtool.analysis.reports import html_data
from fetchtool.analysis.reports.html import render
from fetchtool.analysis.reports.html_data import script_json
from fetchtool.analysis.run import analyze_capture, analyze_items

REPO = Path(__file__).resolve().parents[2]
KAFKA = REPO / "captures" / "kafka"
MAX_PAGE_BYTES = 300_000  # java-evictions: ~140 KB, of which uPlot ~53 KB


@pytest.fixture(scope="module")
def page() -> str:
    return render(analyze_capture([KAFKA / "java-evictions.pcap"]))


def test_the_page_loads_nothing_from_elsewhere(page):
    assert not re.search(r"<(link|iframe|img|object|embed)\b", page, re.IGNORECASE)
    assert not re.search(r"<script[^>]*\bsrc=", page, re.IGNORECASE)
    assert not re.search(r"url\(|@import", page, re.IGNORECASE)
    assert page.count("<script") == 3  # the data, uPlot, the report's script
    assert "uPlot" in page and "https://github.com/leeoniya/uPlot (v1.6.32)" in page


def test_the_page_size_stays_reasonable(page):
    assert len(page.encode()) < MAX_PAGE_BYTES


def test_the_assets_ship_with_the_package():
    assets = files("fetchtool.analysis.reports") / "assets"
    names = sorted(p.name for p in assets.iterdir())
    assert {"uPlot.iife.min.js", "uPlot.min.css", "uPlot.LICENSE", "report.js", "report.css", "README.md"} <= set(names)
    globs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "fetchtool.analysis.reports"]
    assert all(any(fnmatch(f"assets/{n}", g) for g in globs) for n in names)
    assert "MIT License" in (assets / "uPlot.LICENSE").read_text()


def test_embedded_data_cannot_end_its_script_element():
    text = script_json({"client": "</script><!-- & -->"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"client": "</script><!-- & -->"}


def test_the_json_report_keeps_its_contract_and_adds_the_series():
    rep = analyze_capture([KAFKA / "java-evictions.pcap"]).to_json()
    assert list(rep) == ["capture", "brokers", "clients", "sessions", "findings", "savings"]
    (b,) = rep["brokers"]
    assert {"timeline", "cache_occupancy", "traffic", "max_live_sessions"} <= set(b)
    assert b["timeline"]["bucket_s"] > 0 and b["cache_occupancy"]["total"]["t_ms"]


def test_a_client_with_too_many_sessions_gets_the_first_ones_drawn_and_a_note(monkeypatch):
    analysis = analyze_capture([KAFKA / "platformatic-churn.pcap"])
    totals = [len(c["lanes"]) for c in html_data.chart_data(analysis)["clients"]]
    assert max(totals) > 20  # more than report.js names one by one on the axis
    monkeypatch.setattr(html_data, "MAX_LANES", 10)
    data = html_data.chart_data(analysis)
    assert [len(c["lanes"]) for c in data["clients"]] == [min(n, 10) for n in totals]
    assert [c["omitted"] for c in data["clients"]] == [max(0, n - 10) for n in totals]
    for c in data["clients"]:
        lanes = set(range(len(c["lanes"])))
        assert all(set(p["lane"]) <= lanes for p in c["points"].values())
    assert "later session(s) not drawn" in render(analysis)


def test_an_analysis_of_nothing_renders():
    page = render(analyze_items([]))
    assert '<span id="finding-count">0</span>' in page and "No findings." in page and "No brokers." in page


def test_analyze_format_html_writes_the_page_a_ticket_can_carry(tmp_path):
    """The command a support engineer runs: one file, the same findings as the JSON report, and the fetchtool
    version that made it."""
    import subprocess
    import sys

    from fetchtool import tool_version

    out = tmp_path / "report.html"
    capture = KAFKA / "platformatic-churn.pcap"
    subprocess.run([sys.executable, "-m", "fetchtool", "analyze", "--format", "html", "-o", str(out), str(capture)],
                   check=True, capture_output=True)
    page = out.read_text(encoding="utf-8")
    report = json.loads(subprocess.run([sys.executable, "-m", "fetchtool", "analyze", "--format", "json",
                                        str(capture)], check=True, capture_output=True, text=True).stdout)
    assert page.startswith("<!DOCTYPE html>") and f"Made by fetchtool {tool_version()}" in page
    for f in report["findings"]:
        assert f["code"] in page
    assert "platformatic/kafka#315" in page  # the known bug the JSON names
