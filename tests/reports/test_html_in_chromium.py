"""The HTML report opened in headless Chromium on real captures: it loads with no console message, every chart is
drawn, and the numbers on the page are the JSON report's."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from tests.reports.headless import Page, chart_boxes, coloured_pixels, data_blob, elements, open_page

from fetchtool.analysis.model import Analysis
from fetchtool.analysis.reports.html import render
from fetchtool.analysis.reports.html_sections import SAVINGS_COLUMNS
from fetchtool.analysis.run import analyze_capture
from fetchtool.analysis.tracking.tracker import host_of

pytestmark = pytest.mark.chromium

CAPTURES = Path(__file__).resolve().parents[2] / "captures" / "kafka"
MIN_COLOURED = 30  # pixels of series colour a drawn chart shows at least (a single point is ~25)


@dataclass(frozen=True)
class Opened:
    analysis: Analysis
    json: dict
    html: str
    page: Page


def _open(chromium: str, analysis: Analysis, folder: Path) -> Opened:
    html = render(analysis)
    path = folder / "report.html"
    path.write_text(html, encoding="utf-8")
    return Opened(analysis, analysis.to_json(), html, open_page(chromium, path, folder))


# platformatic-churn: a client with 20+ sessions (lanes no longer each named on the axis)
@pytest.fixture(scope="module", params=["java-evictions.pcap", "cluster-followers.pcap", "platformatic-churn.pcap"])
def opened(request, chromium, tmp_path_factory) -> Opened:
    analysis = analyze_capture([CAPTURES / request.param])
    return _open(chromium, analysis, tmp_path_factory.mktemp(request.param.split(".")[0]))


def _sessions_of(report: dict, client: dict) -> set:
    return {(s["broker"], s["session_id"]) for s in report["sessions"]
            if s["client"] and host_of(s["client"]) == client["host"] and s["client_id"] == client["client_id"]}


def test_the_page_loads_with_no_console_message(opened):
    assert opened.page.console == ()
    assert opened.page.body.get("data-ready") == "1"
    assert "data-errors" not in opened.page.body


def test_every_chart_is_drawn(opened):
    rep = opened.json
    expected = {f"traffic-{i}" for i, b in enumerate(rep["brokers"]) if b["timeline"]}
    expected |= {f"occupancy-{i}" for i, b in enumerate(rep["brokers"])
                 if b["cache_occupancy"] and b["cache_occupancy"]["total"]["t_ms"]}
    expected |= {f"sessions-{i}" for i, c in enumerate(rep["clients"]) if _sessions_of(rep, c)}
    boxes = chart_boxes(opened.page.dom)
    assert {b["id"] for b in boxes} == expected
    assert any(i.startswith("occupancy-") for i in expected) and any(i.startswith("sessions-") for i in expected)
    shot = opened.page.screenshot
    for box in boxes:
        assert box["w"] > 500 and box["h"] > 80, box
        assert box["y"] + box["h"] <= shot.height, f"{box['id']} is below the screenshot"
        assert coloured_pixels(shot, box) >= MIN_COLOURED, f"{box['id']}: nothing drawn at {box}"


def test_the_page_shows_no_series_where_there_is_no_chart(opened):
    # The measure is not trivially met: the page's top (title and summary table) has no series colour.
    assert coloured_pixels(opened.page.screenshot, {"x": 0, "y": 0, "w": 1200, "h": 120}) == 0


def test_the_charts_data_is_the_json_reports(opened):
    blob, rep = data_blob(opened.page.dom), opened.json
    assert [b["broker"] for b in blob["brokers"]] == [b["broker"] for b in rep["brokers"]]
    for shown, b in zip(blob["brokers"], rep["brokers"]):
        assert shown["timeline"] == b["timeline"]
        assert shown["cache_occupancy"] == b["cache_occupancy"]
        assert sum(shown["timeline"]["fetches"]) == b["traffic"]["fetches"]
    assert len(blob["clients"]) == len(rep["clients"])
    for shown, c in zip(blob["clients"], rep["clients"]):
        assert {(lane["broker"], lane["session_id"]) for lane in shown["lanes"]} == _sessions_of(rep, c)


def test_the_findings_on_the_page_are_the_json_reports(opened):
    dom, findings = opened.page.dom, opened.json["findings"]
    (count,) = elements(dom, lambda t, a: a.get("id") == "finding-count")
    assert int(count["text"]) == len(findings) > 0
    items = elements(dom, lambda t, a: "finding" in (a.get("class") or "").split())
    assert [i["attrs"]["data-code"] for i in items] == [f["code"] for f in findings]
    messages = elements(dom, lambda t, a: a.get("class") == "message")
    assert [m["text"] for m in messages] == [f["message"] for f in findings]
    advice = elements(dom, lambda t, a: a.get("class") == "advice")
    assert [a["text"] for a in advice] == ["Advice: " + f["advice"] for f in findings]
    filters = elements(dom, lambda t, a: a.get("class") == "filter")
    assert len(filters) == sum(1 for f in findings if f["frames"] or f["request_frame"] or f["response_frame"])


def test_the_savings_on_the_page_are_the_json_reports(opened):
    s = opened.json["savings"]
    (table,) = elements(opened.page.dom, lambda t, a: a.get("class") == "savings")
    cells = [c["text"] for c in elements(opened.page.dom, lambda t, a: t == "td")]
    rows = [s["total"]] + s["per_client"]
    width = 1 + len(SAVINGS_COLUMNS)
    shown = [cells[i:i + width] for i in range(len(cells) - width * len(rows), len(cells), width)]
    assert len(shown) == len(rows) == len(s["per_client"]) + 1
    for row, figures in zip(shown, rows):
        assert [int(v.replace(",", "")) for v in row[1:]] == [figures[k] for k, _ in SAVINGS_COLUMNS]
    assert [r[0] for r in shown[1:]] == [f"{c['client_id'] or '?'}@{c['client']}" for c in s["per_client"]]
    assert table["text"]


def test_a_hostile_client_id_is_shown_as_text(chromium, tmp_path):
    hostile = '</script><script>console.error("pwned")</script>\x1b[2J<img src=x onerror=alert(1)>\x00'
    analysis = analyze_capture([CAPTURES / "java-evictions.pcap"])
    client_id = analysis.clients[0].client_id
    renamed = replace(
        analysis, clients=tuple(replace(c, client_id=hostile) if c.client_id == client_id else c
                                for c in analysis.clients),
        sessions=tuple(replace(s, client_id=hostile) if s.client_id == client_id else s for s in analysis.sessions),
        findings=tuple(replace(f, client_id=hostile, message=f.message + hostile) if f.client_id == client_id else f
                       for f in analysis.findings))  # fmt: skip
    got = _open(chromium, renamed, tmp_path)
    assert got.page.console == ()
    assert got.page.body.get("data-ready") == "1"
    assert "\x1b" not in got.html and "\x00" not in got.html and "<img" not in got.html
    shown = hostile.replace("\x1b", "\\x1b").replace("\x00", "\\x00")  # escaped as text, not dropped
    headings = [h["text"] for h in elements(got.page.dom, lambda t, a: t == "h3")]
    assert f"{shown}@{analysis.clients[0].host}" in headings
    assert any(m["text"].endswith(shown) for m in elements(got.page.dom, lambda t, a: a.get("class") == "message"))
