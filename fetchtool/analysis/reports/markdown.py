"""The Markdown report, for pasting into a ticket."""

from __future__ import annotations

from fetchtool.analysis.reports import savings_panel, traffic_tables
from fetchtool.analysis.shown import some
from fetchtool.analysis.model import ERROR, INFO, WARNING, Analysis
from fetchtool.analysis.reports.terminal import MAX_SESSION_ROWS, created_text, end_text, filter_text, span_text
from fetchtool.analysis.reports.units import count
from fetchtool.printable import one_line
from fetchtool.protocol.report import warning_lines


def _cell(text) -> str:
    return one_line(str(text)).replace("|", "\\|")


def _heading(title: str, rows) -> str:
    return f"## {title} ({len(rows):,})" if rows else f"## {title}"  # no "(0)" above "No ... in the capture."


def _frames(f) -> str | None:
    if not (f.request_frame or f.response_frame):
        return None
    if f.request_frame and f.response_frame:
        return f"frames {f.request_frame}/{f.response_frame} (request/response)"
    return f"request frame {f.request_frame}" if f.request_frame else f"response frame {f.response_frame}"


def render(a: Analysis) -> str:
    c = a.capture
    out = ["# Kafka fetch session analysis", ""]
    if c.filters:
        out.append(f"- Filter: {filter_text(c)}")
    out += [f"- Files: {', '.join(c.files) or '-'}",
            f"- Time: {span_text(c)}",
            f"- Exchanges: {c.exchanges:,} (Fetch {c.fetch_exchanges:,}, FetchSnapshot {c.snapshot_exchanges:,})",
            f"- Bytes: requests {c.request_bytes:,}, responses {c.response_bytes:,}, records {c.records_bytes:,}"]
    counts = {s: sum(1 for f in a.findings if f.severity == s) for s in (ERROR, WARNING, INFO)}
    out.append(f"- Findings: {count(counts[ERROR], 'error')}, {count(counts[WARNING], 'warning')}, "
               f"{counts[INFO]:,} info")
    d = c.decode
    if d:
        out.append(f"- Decode: {count(d.get('packets', 0), 'packet')}, {count(d.get('connections', 0), 'connection')}, "
                   f"{count(d.get('gaps', 0), 'gap')}")
        out += [f"- Decode warning: {_cell(w)}" for w in warning_lines(d)]
    out += ["", "## Findings", ""]
    if not a.findings:
        out += ["No findings.", ""]
    for f in a.findings:
        cause = f" (cause: {f.cause})" if f.cause else ""
        out.append(f"### {f.severity.upper()} {f.code}{cause}")
        out.append("")
        out.append(one_line(f.message))
        out.append("")
        where = [f"file {f.file}" if f.file else None, _frames(f),
                 f"client {one_line(f.client_id or '?')}@{f.client}" if f.client else None,
                 f"broker {f.broker}" if f.broker else None,
                 (f"session {f.session_id}" + (f" epoch {f.epoch}" if f.epoch is not None else ""))
                 if f.session_id else None,
                 f"{f.count:,} occurrences, frames {', '.join(map(str, f.frames))}" if f.count > 1 else None]
        out.append("- Where: " + ("; ".join(w for w in where if w) or "the whole capture"))
        out.append(f"- Advice: {one_line(f.advice)}")
        out.append("")
    out += [_heading("Brokers", a.brokers), ""]
    if not a.brokers:
        out.append("No brokers in the capture.")
    else:
        out += ["| broker | exchanges | clients | sessions created | max live | refused | errors |",
                "|---|---|---|---|---|---|---|"]
    for b in a.brokers:
        errs = ", ".join(f"{k}x{v:,}" for k, v in b.errors.items()) or "-"
        out.append(f"| {b.broker} | {b.exchanges:,} | {b.clients:,} | {b.sessions_created:,} | "
                   f"{b.max_live_sessions:,} | {b.refused_creations:,} | {errs} |")
    out += ["", _heading("Clients", a.clients), ""]
    if not a.clients:
        out.append("No clients in the capture.")
    else:
        out += ["| client | connections | brokers | software | Fetch versions | requests | sessions |",
                "|---|---|---|---|---|---|---|"]
    for cl in a.clients:
        out.append("| " + " | ".join(_cell(x) for x in (
            cl.label, ", ".join(some(cl.addresses)), ", ".join(cl.brokers), ", ".join(cl.software) or "-",
            ", ".join(f"{k}:{v:,}" for k, v in cl.fetch_versions.items()) or "-",
            ", ".join(f"{k} {v:,}" for k, v in cl.request_kinds.items()) or "-", len(cl.sessions))) + " |")  # fmt: skip
    total = len(a.sessions) + a.sessions_more
    out += ["", f"## Sessions ({total:,})" if total else "## Sessions", ""]
    if not a.sessions:
        out.append("No fetch sessions in the capture.")
    else:
        out += ["| session | broker | client | created | partitions | incremental | end |",
                "|---|---|---|---|---|---|---|"]
    for s in a.sessions[:MAX_SESSION_ROWS]:
        out.append("| " + " | ".join(_cell(x) for x in (
            s.session_id, s.broker, one_line(s.owner), created_text(s),
            f"{s.first_partitions}->{s.partitions}", f"{s.incremental_requests:,}", end_text(s))) + " |")  # fmt: skip
    if a.sessions_more:
        out.append(f"\n{total - min(len(a.sessions), MAX_SESSION_ROWS):,} more sessions: see "
                   "`fetchtool analyze --format json --sessions all`.")
    elif len(a.sessions) > MAX_SESSION_ROWS:
        out.append(f"\n{len(a.sessions) - MAX_SESSION_ROWS:,} more sessions: see `fetchtool analyze --format json`.")
    out += ["", *traffic_tables.markdown(a)]
    if a.savings:
        out += ["", *savings_panel.markdown(a.savings)]
    return "\n".join(out) + "\n"
