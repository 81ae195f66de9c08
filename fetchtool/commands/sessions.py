"""Print fetch session timelines epoch by epoch (all clients, or one with --client), and the sessions clients
asked for and were refused, or were granted and never used."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

import typer

from fetchtool.commands.analyze import load, sessions_limit, sessions_option
from fetchtool.commands.options import since_option, until_option, width_option
from fetchtool.commands.wording import count
from fetchtool.printable import one_line

if TYPE_CHECKING:
    from fetchtool.analysis.shown import NeverUsed

# What the timelines need is imported inside the functions that use it: `sessions --help` imports none of it.

FORMATS = ("table", "json", "markdown")


def main(
    capture: List[Path] = typer.Argument(..., help="pcap / pcapng files"),
    client: Optional[str] = typer.Option(None, "--client", help="client id, host or ip:port"),
    broker: Optional[str] = typer.Option(None, "--broker", help="broker ip:port or host"),
    port: Optional[List[int]] = typer.Option(None, "--port", help="broker port (repeatable)"),
    cache_slots: Optional[int] = typer.Option(
        None, "--cache-slots", help="the brokers' max.incremental.fetch.session.cache.slots, to explain evictions "
                                    "(default: infer)"),
    cache_shards: Optional[int] = typer.Option(
        None, "--cache-shards", help="fetch session cache shards (8 since Kafka 3.8, 1 before; default 8 with "
                                     "--cache-slots)"),
    eviction_ms: Optional[int] = typer.Option(
        None, "--eviction-ms", help="how long a session must be unused before a newcomer may evict it (Kafka: "
                                    "120000, not a config; set it for a broker that differs, e.g. fetchtool broker)"),
    format: str = typer.Option("table", "--format", "-f", help="table | json | markdown"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="write the report to this file"),
    since: Optional[str] = since_option(),
    until: Optional[str] = until_option(),
    width: Optional[int] = width_option(),
    sessions: Optional[str] = sessions_option(),
) -> None:
    import json

    from fetchtool.analysis.reports.timeline import Timeline
    from fetchtool.analysis.run import concerns
    from fetchtool.analysis.shown import choose, more_text
    from fetchtool.commands.output import check_choice, emit, report_console
    from fetchtool.commands.session_use import RefusalTally
    from fetchtool.commands.stamp import stamp_json, stamp_markdown
    from fetchtool.commands.window import time_window

    check_choice(format, "--format", FORMATS)
    limit = sessions_limit(sessions)
    report_console(width=width)  # a bad --width fails before the capture is read
    tally = RefusalTally(only=(lambda ex: concerns(ex, client, broker)) if client or broker else None)
    analysis, reading = load(capture, port, cache_slots, cache_shards, client, broker, eviction_ms=eviction_ms,
                             window=time_window(since, until, capture), tap=tally.tap, sessions=limit)
    refusals = tally.most_first()
    unused = analysis.never_used or choose(analysis.sessions, None).never_used  # counted over every session
    if format == "json":
        doc: dict[str, object] = {"sessions": [dict(s.to_json(), steps=[st.to_json() for st in s.steps]) for s in analysis.sessions],
               "refused": [r.to_json() for r in refusals],
               "never_used": [{"broker": s.broker, "session_id": s.session_id, "client": s.owner,
                               "created_request_frame": s.created_request_frame} for s in unused.first]}
        if analysis.sessions_more:  # bounded lists say how many there are (extension keys, only then)
            doc["sessions_total"] = analysis.sessions_total
            doc["sessions_more"] = more_text(len(analysis.sessions), analysis.sessions_total or 0)
        if unused.total > len(unused.first):
            doc["never_used_total"] = unused.total
        if reading.interrupted:
            doc["interrupted"] = True
        emit(json.dumps(stamp_json(doc), indent=2) + "\n", output)
    elif format == "markdown":
        text = markdown(analysis.sessions, refusals, unused)
        if analysis.sessions_more:
            text += f"\n{more_text(len(analysis.sessions), analysis.sessions_total or 0)}.\n"
        emit(stamp_markdown(text), output)
    else:
        buf = None if output is None else io.StringIO()
        console = report_console(buf, width=width)
        for line in use_lines(refusals, unused):
            console.print(line, highlight=False, markup=False)
        if not analysis.sessions:
            console.print("No fetch sessions" + (f" for client {client}" if client else "") + " in the capture.")
        for s in analysis.sessions:
            console.print(Timeline(s))
        if analysis.sessions_more:
            console.print(more_text(len(analysis.sessions), analysis.sessions_total or 0) + " (those that failed "
                          "are listed first)", highlight=False, markup=False)
        if buf is not None:
            emit(buf.getvalue(), output)
    reading.finish()


def use_lines(refusals, unused: NeverUsed) -> list[str]:
    """One line per client refused, one per client whose sessions went unused."""
    lines = [f"client {one_line(r.client)}: {count(r.count, 'session-creating fetch')} refused (session id 0) by {r.broker}, "
             f"frames {r.first_frame:,}..{r.last_frame:,}" for r in refusals]
    for owner, broker, n, first in unused.groups:
        ids = ", ".join(str(i) for i in first) + (", ..." if n > len(first) else "")
        lines.append(f"client {one_line(owner)}: {count(n, 'session')} created on {broker} but never used "
                     f"incrementally ({ids})")
    return lines


def markdown(sessions, refusals, unused) -> str:
    from fetchtool.analysis.reports.terminal import created_text, end_text
    from fetchtool.analysis.reports.timeline import rows

    out = ["# Fetch sessions", ""]
    lines = use_lines(refusals, unused)
    if lines:
        out += ["## Refused and unused", ""] + [f"- {line}" for line in lines] + [""]
    if not sessions:
        out += ["No fetch sessions in the capture.", ""]
    for s in sessions:
        out += [f"## Session {s.session_id} on {s.broker}", "",
                f"Client {one_line(s.owner)}; created {created_text(s)}; {end_text(s)}.", "",
                "| time (UTC) | frames | conn | kind | epoch | partitions | result |",
                "|---|---|---|---|---|---|---|"]
        out += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows(s)]
        if s.steps_dropped:
            out.append(f"\n{count(s.steps_dropped, 'later request')} not kept.")
        out.append("")
    return "\n".join(out)
