"""The rich terminal report: capture summary, clients, sessions, findings by severity, savings."""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.panel import Panel
from rich.text import Text

from fetchtool.analysis.reports import savings_panel, traffic_tables
from fetchtool.analysis.reports.fit import Col, Fit
from fetchtool.analysis.reports.timefmt import when
from fetchtool.analysis.reports.units import count
from fetchtool.printable import one_line
from fetchtool.protocol.report import warning_lines
from fetchtool.analysis.shown import some
from fetchtool.analysis.model import ERROR, INFO, WARNING, Analysis, SessionLife

STYLE = {ERROR: "bold red", WARNING: "yellow", INFO: "cyan"}
MAX_SESSION_ROWS = 50




def render(analysis: Analysis, console: Console) -> None:
    console.print(summary_panel(analysis))
    console.print(clients_table(analysis))
    console.print(sessions_table(analysis))
    for table in (traffic_tables.traffic_table(analysis), *traffic_tables.errors_tables(analysis)):
        if table is not None:
            console.print(table)
    console.print(findings_view(analysis))
    if analysis.savings:
        console.print(savings_panel.terminal(analysis.savings, table=False))  # the table: `fetchtool savings`


def summary_panel(a: Analysis) -> Panel:
    c = a.capture
    lines = [f"filter: {filter_text(c)}"] if c.filters else []
    lines += [
        f"files: {', '.join(c.files) or '-'}",
        f"time: {span_text(c)}",
        f"exchanges: {c.exchanges:,} (Fetch {c.fetch_exchanges:,}, FetchSnapshot {c.snapshot_exchanges:,})",
        f"bytes: requests {c.request_bytes:,}, responses {c.response_bytes:,}, records {c.records_bytes:,}",
    ]
    lines += [f"broker {broker_text(b)}" for b in a.brokers]
    d = c.decode
    if d:
        lines.append(f"decode: {count(d.get('packets', 0), 'packet')}, {count(d.get('connections', 0), 'connection')}, "
                     f"{count(d.get('gaps', 0), 'gap')}, {count(len(d.get('warnings', {})), 'warning kind')}")
        lines += [f"decode warning: {w}" for w in warning_lines(d)]
    return Panel("\n".join(lines), title="Capture", expand=False)


def span_text(c) -> str:
    if c.first_ts is None:
        return "no Fetch exchanges in the capture"
    return f"{when(c.first_ts)} .. {when(c.last_ts)} UTC"


def filter_text(c) -> str:
    """Which --client / --broker the report is kept to, said once at its top."""
    return ", ".join(f"--{k} {v}" for k, v in c.filters.items()) + " (every figure below counts only these exchanges)"


def broker_text(b) -> str:
    errs = ", ".join(f"{k}x{v:,}" for k, v in b.errors.items()) or "none"
    return (f"{b.broker}: {count(b.exchanges, 'exchange')}, {count(b.clients, 'client')}, "
            f"{count(b.sessions_created, 'session')} created, up to {b.max_live_sessions:,} live, "
            f"{b.refused_creations:,} refused, errors {errs}")


def clients_table(a: Analysis) -> Fit:
    rows = [(c.label, some(c.addresses), tuple(c.brokers), ", ".join(c.software) or "-",
             ", ".join(f"{k}:{v:,}" for k, v in c.fetch_versions.items()) or "-",
             ", ".join(f"{k} {v:,}" for k, v in c.request_kinds.items()) or "-", f"{len(c.sessions):,}",
             ", ".join(f"{k}x{v:,}" for k, v in c.errors.items()) or "-") for c in a.clients]  # fmt: skip
    return Fit(f"Clients ({len(rows):,})", CLIENT_COLS, rows, empty="No clients in the capture.")


CLIENT_COLS = (Col("client"), Col("connections"), Col("brokers"), Col("software", prose=True),
               Col("Fetch versions", prose=True), Col("requests", prose=True), Col("sessions", right=True),
               Col("errors", prose=True))
SESSION_COLS = (Col("session", right=True), Col("broker"), Col("client"), Col("created (frames)"),
                Col("partitions"), Col("incr.", right=True), Col("last epoch", right=True),
                Col("errors", right=True), Col("end", prose=True))


def sessions_table(a: Analysis) -> Fit:
    rows = [(str(s.session_id), s.broker, one_line(s.owner), created_text(s),
             f"{s.first_partitions}->{s.partitions} (max {s.max_partitions})", f"{s.incremental_requests:,}",
             "-" if s.last_epoch is None else str(s.last_epoch), f"{s.errors:,}", end_text(s))
            for s in a.sessions[:MAX_SESSION_ROWS]]  # fmt: skip
    caption = None
    total = len(a.sessions) + a.sessions_more
    if a.sessions_more:  # the analysis lists some (those that failed first): the rest only on request
        caption = f"{total - len(rows):,} more sessions, --sessions all --format json to list them"
    elif len(a.sessions) > MAX_SESSION_ROWS:
        caption = f"{len(a.sessions) - MAX_SESSION_ROWS:,} more sessions in --format json"
    return Fit(f"Sessions ({total:,})", SESSION_COLS, rows, caption,
               empty="No fetch sessions in the capture.", label="session {}")


def created_text(s: SessionLife) -> str:
    if s.started_before_capture:
        return "before capture"
    return f"{s.created_request_frame}/{s.created_response_frame} v{s.created_version}"


def end_text(s: SessionLife) -> str:
    out = "alive at capture end" if s.end == "alive" else s.end
    if s.end_frame is not None:
        out += f" @{s.end_frame}"
    if s.end_reason and s.end != "alive":
        out += f": {s.end_reason}"
    return out


def findings_view(a: Analysis):
    """Findings by severity, each a short block: headline, where (frames to open in Wireshark), what, advice.
    Blocks rather than a table, so a long message and its advice stay readable in an 80-column terminal."""
    if not a.findings:
        return Panel("No findings.", title="Findings", expand=False)
    parts: list[RenderableType] = []
    for sev in (ERROR, WARNING, INFO):
        fs = [f for f in a.findings if f.severity == sev]
        if not fs:
            continue
        parts.append(Text(f"{sev.upper()} ({len(fs)})", style=STYLE[sev] + " underline"))
        for f in fs:
            head = Text(f"\u25cf {f.code}", style=STYLE[sev])
            if f.cause:
                head.append(f"  cause: {f.cause}", style="bold")
            if f.count > 1:
                head.append(f"  x{f.count:,}")
            # indented as a block, so a wrapped line stays under its finding
            parts += [head, *(Padding(t, (0, 0, 0, 2), expand=False) for t in (
                Text(where_text(f), style="dim"), Text(one_line(f.message)),
                Text("advice: " + one_line(f.advice), style="green"))),
                Text("")]
    return Group(*parts)


def where_text(f) -> str:
    where = []
    if f.client:
        where.append(f"client {one_line(f.client_id or '?')}@{f.client}")
    if f.broker:
        where.append(f"broker {f.broker}")
    if f.session_id:
        where.append(f"session {f.session_id}" + (f" epoch {f.epoch}" if f.epoch is not None else ""))
    if f.request_frame or f.response_frame:
        frames = f"frames {f.request_frame or '-'}/{f.response_frame or '-'}"
        where.append(frames + (f" (+{f.count - 1:,} more)" if f.count > 1 else ""))
    if f.file:
        where.append(f"in {f.file}")
    return ", ".join(where) or "the whole capture"
