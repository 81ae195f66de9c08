"""The HTML report's text parts: capture summary, findings, savings. Every value goes through `esc` (HTML-escaped,
control characters escaped), so nothing from a capture can become markup or script."""

from __future__ import annotations

from html import escape

from fetchtool.analysis.model import Analysis, Finding
from fetchtool.analysis.reports.html_data import clean
from fetchtool.analysis.reports.savings_panel import summary_lines
from fetchtool.analysis.reports.timefmt import clock

# The savings figures a table shows: (JSON key, column title)
SAVINGS_COLUMNS = (("exchanges", "fetches"), ("actual_bytes", "bytes on the wire"), ("records_bytes", "records"),
                   ("incremental_bytes", "with sessions"), ("saved_bytes", "saving"),
                   ("realised_bytes", "already saved"), ("lost_bytes", "lost by failing sessions"))


def esc(value) -> str:
    return escape(clean(value), quote=True)


def summary(a: Analysis) -> str:
    c = a.capture
    span = (f"{clock(c.first_ts)} to {clock(c.last_ts)} ({c.last_ts - c.first_ts:.1f} s)"
            if c.first_ts is not None and c.last_ts is not None else "-")
    rows = [("Files", ", ".join(c.files) or "-"), ("Time", span),
            ("Exchanges", f"{c.exchanges:,} (Fetch {c.fetch_exchanges:,}, FetchSnapshot {c.snapshot_exchanges:,})"),
            ("Bytes", f"requests {c.request_bytes:,}, responses {c.response_bytes:,}, records {c.records_bytes:,}"),
            ("Brokers", ", ".join(f"{b.broker} ({b.exchanges:,} exchanges, {b.sessions_created} sessions created, "
                                  f"up to {b.max_live_sessions} live)" for b in a.brokers) or "-"),
            ("Clients", str(len(a.clients))), ("Sessions", _sessions_count(a))]
    return _table(("", ""), rows, "summary", header=False)


def findings(a: Analysis) -> str:
    head = f'<p>Findings: <span id="finding-count">{len(a.findings)}</span></p>'
    if not a.findings:
        return head + "<p>No findings.</p>"
    return head + '<ol class="findings">' + "".join(_finding(i, f) for i, f in enumerate(a.findings)) + "</ol>"


def _finding(i: int, f: Finding) -> str:
    cause = f' <span class="cause">cause: {esc(f.cause)}</span>' if f.cause else ""
    count = f' <span class="count">×{f.count}</span>' if f.count > 1 else ""
    where = [f"client {esc(f.client_id or '?')}@{esc(f.client)}" if f.client else "",
             f"broker {esc(f.broker)}" if f.broker else "",
             f"session {f.session_id} epoch {f.epoch}" if f.session_id else "",
             f"at {clock(f.ts)}" if f.ts is not None else ""]
    frames = _frames(f)
    wireshark = (f'<div class="frames">Wireshark{" (" + esc(f.file) + ")" if f.file else ""}: '
                 f'<code class="filter">{esc(frames)}</code></div>' if frames else "")
    bugs = ("<div class=\"bugs\">Known bugs: <ul>" + "".join(f"<li>{esc(b)}</li>" for b in f.known_bugs)
            + "</ul></div>") if f.known_bugs else ""
    return (f'<li class="finding sev-{esc(f.severity)}" id="finding-{i}" data-code="{esc(f.code)}">'
            f'<div class="head"><span class="severity">{esc(f.severity.upper())}</span> '
            f'<span class="code">{esc(f.code)}</span>{cause}{count}</div>'
            f'<div class="where">{esc("; ".join(w for w in where if w))}</div>'
            f'<p class="message">{esc(f.message)}</p>{wireshark}'
            f'<p class="advice"><b>Advice:</b> {esc(f.advice)}</p>{bugs}</li>')


def _frames(f: Finding) -> str:
    """A Wireshark display filter for the finding's frames (its first occurrences, for aggregated findings)."""
    frames = list(dict.fromkeys(n for n in (f.request_frame, f.response_frame, *f.frames) if n is not None))
    if not frames:
        return ""
    return f"frame.number == {frames[0]}" if len(frames) == 1 else \
        "frame.number in {" + " ".join(map(str, frames)) + "}"


def savings(a: Analysis) -> str:
    s = a.savings or {}
    lines = "".join(f"<p>{esc(line)}</p>" for line in summary_lines(s))
    titles = ("client",) + tuple(t for _, t in SAVINGS_COLUMNS)
    total = s.get("total") or {}
    rows = [("all clients",) + tuple(_bytes(total.get(k)) for k, _ in SAVINGS_COLUMNS)]
    rows += [(f"{c.get('client_id') or '?'}@{c.get('client')}",) + tuple(_bytes(c.get(k)) for k, _ in SAVINGS_COLUMNS)
             for c in s.get("per_client") or ()]  # fmt: skip
    return lines + _table(titles, rows, "savings")


def _bytes(n) -> str:
    return "-" if n is None else f"{n:,}"


def _table(titles, rows, css: str, header: bool = True) -> str:
    head = "<tr>" + "".join(f"<th>{esc(t)}</th>" for t in titles) + "</tr>" if header else ""
    body = "".join("<tr>" + "".join(f"<td>{esc(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f'<table class="{css}">{head}{body}</table>'


def _sessions_count(a) -> str:
    """How many sessions; and, when the report lists only some (--sessions), how many it charts."""
    if not a.sessions_more:
        return str(len(a.sessions))
    return (f"{len(a.sessions) + a.sessions_more:,} ({len(a.sessions):,} charted, those that failed first; "
            "--sessions all to chart every one)")
