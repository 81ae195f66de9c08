"""The `analyze --format html` report: one self-contained page (every script and style inlined, nothing fetched
at view time) with the findings, each client's sessions over time, each broker's cache occupancy and its fetches,
errors and response times over time, and the savings.

Charts are drawn by uPlot (assets/, MIT, see assets/README.md), inlined: ~50 KB, no dependencies, and it draws
series of tens of thousands of points on a canvas in milliseconds. The charts' data is one JSON blob in the page
(`<script id="fetchtool-data">`), the same numbers as the JSON report's extension keys.
"""

from __future__ import annotations

from importlib.resources import files

from fetchtool.analysis.model import Analysis
from fetchtool.analysis.reports import html_sections as sections
from fetchtool.analysis.reports.html_data import MAX_CLIENT_CHARTS, MAX_LANES, chart_data, script_json
from fetchtool.analysis.reports.html_sections import esc

_ASSETS = files("fetchtool.analysis.reports") / "assets"


def asset(name: str) -> str:
    text = (_ASSETS / name).read_text(encoding="utf-8")
    if "</script" in text.lower() or "</style" in text.lower():
        # a vendored update must not break the page
        raise ValueError(f"asset {name} would end its inline element early")
    return text


def render(analysis: Analysis, made_by: str = "") -> str:
    """The whole page, as text (UTF-8 when written). ``made_by``: which fetchtool made it (the command's stamp)."""
    data = chart_data(analysis)
    body = [
        "<h1>Kafka fetch session analysis</h1>", sections.summary(analysis),
        "<h2>Findings</h2>", sections.findings(analysis),
        "<h2>Errors and response times over time</h2>", _traffic(data),
        "<h2>Session cache occupancy</h2>", _occupancy(analysis, data),
        "<h2>Sessions per client</h2>", _sessions(data),
        "<h2>Savings with incremental fetch sessions</h2>", sections.savings(analysis),
    ]
    if made_by:
        body.append(f'<footer id="made-by">{esc(made_by)}</footer>')
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        "<title>fetchtool analysis</title>",
        f"<style>{asset('uPlot.min.css')}\n{asset('report.css')}</style></head><body>",
        *body,
        f'<script type="application/json" id="fetchtool-data">{script_json(data)}</script>',
        f"<script>{asset('uPlot.iife.min.js')}</script>",
        f"<script>{asset('report.js')}</script>",
        "</body></html>", "",
    ])


def _traffic(data: dict) -> str:
    out = []
    for b in data["brokers"]:
        out.append(f"<h3>Broker {esc(b['broker'])}</h3>")
        out.append(f'<div class="chart" id="{b["traffic_id"]}"></div>' if b["timeline"] else
                   "<p>No Fetch requests.</p>")
    return "\n".join(out) or "<p>No brokers.</p>"


def _occupancy(analysis: Analysis, data: dict) -> str:
    out = [("<p>Live sessions in each broker's fetch session cache, as Kafka's own cache (FetchSessionCache) holds "
            "them when the capture's sessions are replayed through it, in the cache size given (--cache-slots) or "
            "else in the size, of those the capture allows, that shows the fewest live sessions (a lower bound); per "
            "shard where the cache is sharded (Kafka 3.8+).</p>")]
    for summary, b in zip(analysis.brokers, data["brokers"]):
        oc = b["cache_occupancy"]
        out.append(f"<h3>Broker {esc(b['broker'])}</h3>")
        if not oc or not oc["total"]["t_ms"]:
            out.append("<p>No session in the cache during the capture (or no cache size fits the capture).</p>")
            continue
        per = oc["slots_per_shard"]
        shape = (f"{oc['shards']} shard(s) of {per} slot(s)" if per is not None
                 else f"{oc['shards']} shard(s), no slot limit reached")
        out.append(f"<p>Replayed as {esc(shape)}; at most {summary.max_live_sessions} live.</p>")
        out.append(f'<div class="chart" id="{b["occupancy_id"]}"></div>')
    return "\n".join(out)


def _sessions(data: dict) -> str:
    out = [("<p>One line per session, from its creation (or first sight) to its end: created (green), "
            "incremental fetches (blue), full or sessionless fetches (purple), errors (red), end (black).</p>")]
    for c in data["clients"]:
        out.append(f"<h3>{esc(c['client'])}</h3>")
        if not c["charted"]:
            out.append(f"<p>Not charted: only the first {MAX_CLIENT_CHARTS} clients are (see the JSON report).</p>")
            continue
        out.append(f'<div class="chart" id="{c["id"]}"></div>' if c["lanes"] else "<p>No fetch session.</p>")
        if c["omitted"]:
            out.append(f"<p>{c['omitted']} later session(s) not drawn: {MAX_LANES} are (see the JSON report).</p>")
    return "\n".join(out)
