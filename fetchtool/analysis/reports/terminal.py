"""The rich terminal report: capture summary, clients, sessions, findings by severity, savings."""

from __future__ import annotations

from datetime import datetime, timezone

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from fetchtool.analysis.reports import savings_panel, traffic_tables
from fetchtool.analysis.model import ERROR, INFO, WARNING, Analysis, SessionLife

STYLE = {ERROR: "bold red", WARNING: "yellow", INFO: "cyan"}
MAX_SESSION_ROWS = 50


def when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


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
    lines = [
        f"files: {', '.join(c.files) or '-'}",
        f"time: {when(c.first_ts)} .. {when(c.last_ts)} UTC",
        f"exchanges: {c.exchanges:,} (Fetch {c.fetch_exchanges:,}, FetchSnapshot {c.snapshot_exchanges:,})",
        f"bytes: requests {c.request_bytes:,}, responses {c.response_bytes:,}, records {c.records_bytes:,}",
    ]
    for b in a.brokers:
        errs = ", ".join(f"{k}x{v}" for k, v in b.errors.items()) or "none"
        lines.append(f"broker {b.broker}: {b.exchanges:,} exchanges, {b.clients} client(s), {b.sessions_created} "
                     f"session(s) created, up to {b.max_live_sessions} live, {b.refused_creations} refused, "
                     f"errors {errs}")  # fmt: skip
    d = c.decode
    if d:
        lines.append(f"decode: {d.get('packets', 0):,} packets, {d.get('connections', 0)} connections, "
                     f"{d.get('gaps', 0)} gaps, {len(d.get('warnings', {}))} warning kind(s)")  # fmt: skip
    return Panel("\n".join(lines), title="Capture", expand=False)


def clients_table(a: Analysis) -> Table:
    t = Table(title="Clients", show_lines=False)
    for col in ("client", "connections", "brokers", "software", "Fetch versions", "requests", "sessions", "errors"):
        t.add_column(col)
    for c in a.clients:
        kinds = ", ".join(f"{k} {v}" for k, v in c.request_kinds.items())
        t.add_row(
            Text(c.label), str(len(c.addresses)), "\n".join(c.brokers), ", ".join(c.software) or "-",
            ", ".join(f"{k}:{v}" for k, v in c.fetch_versions.items()) or "-", kinds, str(len(c.sessions)),
            ", ".join(f"{k}x{v}" for k, v in c.errors.items()) or "-",
        )  # fmt: skip
    return t


def sessions_table(a: Analysis) -> Table:
    t = Table(title=f"Sessions ({len(a.sessions)})")
    for col in ("broker", "session", "client", "created (frames)", "partitions", "incr.", "last epoch", "errors",
                "end"):  # fmt: skip
        t.add_column(col)
    for s in a.sessions[:MAX_SESSION_ROWS]:
        t.add_row(s.broker, str(s.session_id), s.owner, created_text(s),
                  f"{s.first_partitions}->{s.partitions} (max {s.max_partitions})", str(s.incremental_requests),
                  "-" if s.last_epoch is None else str(s.last_epoch), str(s.errors), end_text(s))  # fmt: skip
    if len(a.sessions) > MAX_SESSION_ROWS:
        t.caption = f"{len(a.sessions) - MAX_SESSION_ROWS} more sessions in --format json"
    return t


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
    parts = []
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
                head.append(f"  x{f.count}")
            parts += [head, Text("  " + where_text(f), style="dim"), Text("  " + f.message),
                      Text("  advice: " + f.advice, style="green"), Text("")]
    return Group(*parts)


def where_text(f) -> str:
    where = []
    if f.client:
        where.append(f"client {f.client_id or '?'}@{f.client}")
    if f.broker:
        where.append(f"broker {f.broker}")
    if f.session_id:
        where.append(f"session {f.session_id}" + (f" epoch {f.epoch}" if f.epoch is not None else ""))
    if f.request_frame or f.response_frame:
        frames = f"frames {f.request_frame or '-'}/{f.response_frame or '-'}"
        where.append(frames + (f" (+{f.count - 1} more)" if f.count > 1 else ""))
    if f.file:
        where.append(f"in {f.file}")
    return ", ".join(where) or "the whole capture"
