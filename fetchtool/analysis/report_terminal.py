"""The rich terminal report: capture summary, clients, sessions, findings by severity, savings."""

from __future__ import annotations

from datetime import datetime, timezone

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .model import ERROR, INFO, WARNING, Analysis, SessionLife

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
    console.print(findings_view(analysis))
    if analysis.savings:
        console.print(savings_panel(analysis.savings))


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
        t.add_row(s.broker, str(s.session_id), f"{s.client_id or '?'}@{s.client}", created_text(s),
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
    out = s.end
    if s.end_frame is not None:
        out += f" @{s.end_frame}"
    if s.end_reason and s.end != "alive":
        out += f": {s.end_reason}"
    return out


def findings_view(a: Analysis):
    if not a.findings:
        return Panel("No findings.", title="Findings", expand=False)
    parts = []
    for sev in (ERROR, WARNING, INFO):
        fs = [f for f in a.findings if f.severity == sev]
        if not fs:
            continue
        t = Table(title=f"{sev.upper()} ({len(fs)})", title_style=STYLE[sev], show_lines=True, expand=True)
        t.add_column("code / cause", style=STYLE[sev], no_wrap=True)
        t.add_column("where")
        t.add_column("what and what to do", ratio=3)
        for f in fs:
            frames = f"frames {f.request_frame}/{f.response_frame}" if f.request_frame or f.response_frame else ""
            if f.count > 1:
                frames += f" (+{f.count - 1} more)"
            where = "\n".join(x for x in (f"client {f.client_id or '?'}@{f.client}" if f.client else "",
                                          f"broker {f.broker}" if f.broker else "",
                                          f"session {f.session_id}" if f.session_id else "", frames) if x)  # fmt: skip
            t.add_row(f.code + (f"\n{f.cause}" if f.cause else ""), where, Text(f.message + "\n") +
                      Text("advice: " + f.advice, style="dim"))  # fmt: skip
        parts.append(t)
    return Group(*parts)


def savings_panel(savings: dict) -> Panel:
    total = savings.get("total", {})
    lines = [f"{k}: {v:,}" if isinstance(v, int) else f"{k}: {v}" for k, v in total.items()]
    return Panel("\n".join(lines) or "-", title="Savings with incremental fetch sessions", expand=False)
