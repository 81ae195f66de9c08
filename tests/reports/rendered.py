"""Reports as a user reads them: every real capture, rendered to text at a given console width, and the ids the
JSON report holds (which the text must show whole)."""

from __future__ import annotations

import io
from functools import cache
from pathlib import Path

from rich.console import Console

from fetchtool.analysis.reports import markdown, savings_panel, terminal
from fetchtool.analysis.run import analyze_capture

CAPTURES_DIR = Path(__file__).resolve().parents[2] / "captures"
CAPTURES = sorted(p for pattern in ("*.pcap*", "kafka/*.pcap", "scenarios/*.pcap", "scenarios-real/*.pcap")
                  for p in CAPTURES_DIR.glob(pattern))
WIDTHS = (60, 80, 120, 200)


@cache
def analysis(path: Path, client: str | None = None, broker: str | None = None):
    return analyze_capture([str(path)], client=client, broker=broker)


def text(renderable_or_fn, width: int) -> str:
    """What a console of ``width`` columns shows, as when piped (no colours)."""
    buf = io.StringIO()
    console = Console(width=width, file=buf, color_system=None)
    if callable(renderable_or_fn):
        renderable_or_fn(console)
    else:
        console.print(renderable_or_fn)
    return buf.getvalue()


def analyze_text(a, width: int) -> str:
    return text(lambda console: terminal.render(a, console), width)


def savings_text(a, width: int) -> str:
    """`fetchtool savings`: summary, per-client table and chart."""
    return text(savings_panel.terminal(a.savings), width)


def markdown_text(a) -> str:
    return markdown.render(a)


def ids(a) -> set[str]:
    """Every client id, ip:port, session id (of the rows shown), broker and finding code in the JSON report."""
    j = a.to_json()
    out = {b["broker"] for b in j["brokers"]}
    for c in j["clients"]:
        out |= {c["client_id"] or "?", *c["addresses"], *c["brokers"]}
    out |= {str(s["session_id"]) for s in j["sessions"][:terminal.MAX_SESSION_ROWS]}
    for f in j["findings"]:
        out |= {f["code"]} | {x for x in (f["client"], f["broker"]) if x}
    for c in j["savings"]["per_client"]:
        out |= {c["client_id"] or "?", *c["addresses"]}
    return out
