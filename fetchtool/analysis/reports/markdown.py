"""The Markdown report, for pasting into a ticket."""

from __future__ import annotations

from fetchtool.analysis.reports import savings_panel, traffic_tables
from fetchtool.analysis.model import ERROR, INFO, WARNING, Analysis
from fetchtool.analysis.reports.terminal import MAX_SESSION_ROWS, created_text, end_text, when


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(a: Analysis) -> str:
    c = a.capture
    out = ["# Kafka fetch session analysis", "",
           f"- Files: {', '.join(c.files) or '-'}",
           f"- Time: {when(c.first_ts)} .. {when(c.last_ts)} UTC",
           f"- Exchanges: {c.exchanges:,} (Fetch {c.fetch_exchanges:,}, FetchSnapshot {c.snapshot_exchanges:,})",
           f"- Bytes: requests {c.request_bytes:,}, responses {c.response_bytes:,}, records {c.records_bytes:,}"]
    counts = {s: sum(1 for f in a.findings if f.severity == s) for s in (ERROR, WARNING, INFO)}
    out.append(f"- Findings: {counts[ERROR]} error(s), {counts[WARNING]} warning(s), {counts[INFO]} info")
    out += ["", "## Findings", ""]
    if not a.findings:
        out.append("No findings.")
    for f in a.findings:
        cause = f" (cause: {f.cause})" if f.cause else ""
        out.append(f"### {f.severity.upper()} {f.code}{cause}")
        out.append("")
        out.append(f.message)
        out.append("")
        where = [f"file {f.file}" if f.file else None,
                 f"frames {f.request_frame}/{f.response_frame}" if f.request_frame or f.response_frame else None,
                 f"client {f.client_id or '?'}@{f.client}" if f.client else None,
                 f"broker {f.broker}" if f.broker else None,
                 f"session {f.session_id} epoch {f.epoch}" if f.session_id else None,
                 f"{f.count} occurrences, frames {', '.join(map(str, f.frames))}" if f.count > 1 else None]
        out.append("- Where: " + "; ".join(w for w in where if w))
        out.append(f"- Advice: {f.advice}")
        out.append("")
    out += ["## Brokers", "", "| broker | exchanges | clients | sessions created | max live | refused | errors |",
            "|---|---|---|---|---|---|---|"]
    for b in a.brokers:
        errs = ", ".join(f"{k}x{v}" for k, v in b.errors.items()) or "-"
        out.append(f"| {b.broker} | {b.exchanges} | {b.clients} | {b.sessions_created} | {b.max_live_sessions} | "
                   f"{b.refused_creations} | {errs} |")
    out += ["", "## Clients", "", "| client | connections | brokers | software | Fetch versions | requests | sessions |",
            "|---|---|---|---|---|---|---|"]
    for cl in a.clients:
        out.append("| " + " | ".join(_cell(x) for x in (
            cl.label, len(cl.addresses), ", ".join(cl.brokers), ", ".join(cl.software) or "-",
            ", ".join(f"{k}:{v}" for k, v in cl.fetch_versions.items()) or "-",
            ", ".join(f"{k} {v}" for k, v in cl.request_kinds.items()), len(cl.sessions))) + " |")  # fmt: skip
    out += ["", "## Sessions", "", "| broker | session | client | created | partitions | incremental | end |",
            "|---|---|---|---|---|---|---|"]
    for s in a.sessions[:MAX_SESSION_ROWS]:
        out.append("| " + " | ".join(_cell(x) for x in (
            s.broker, s.session_id, s.owner, created_text(s),
            f"{s.first_partitions}->{s.partitions}", s.incremental_requests, end_text(s))) + " |")  # fmt: skip
    if len(a.sessions) > MAX_SESSION_ROWS:
        out.append(f"\n{len(a.sessions) - MAX_SESSION_ROWS} more sessions: see `fetchtool analyze --format json`.")
    out += ["", *traffic_tables.markdown(a)]
    if a.savings:
        out += ["", *savings_panel.markdown(a.savings)]
    return "\n".join(out) + "\n"
