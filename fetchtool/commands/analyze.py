"""Analyse captures: which clients and fetch sessions they hold, what went wrong, why, and what to do."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

import typer

from fetchtool.commands.defaults import SESSIONS_LISTED
from fetchtool.commands.options import since_option, until_option, width_option
from fetchtool.pipeline import ENGINES

if TYPE_CHECKING:
    from fetchtool.analysis.model import Analysis
    from fetchtool.commands.reading import Reading
    from fetchtool.commands.window import TimeWindow

# What analysing needs is imported inside the functions that use it: `analyze --help` imports none of it.

FORMATS = ("table", "json", "markdown", "html")


def load(captures: List[Path], ports, cache_slots, cache_shards, client=None, broker=None, engine: str = "polars",
         master=None, eviction_ms: int | None = None, window: TimeWindow | None = None,
         tap=None, sessions: int | None = SESSIONS_LISTED, verbose: bool = False) -> tuple[Analysis, Reading]:
    """The analysis of the captures inside ``window``, kept to ``client`` / ``broker`` if given, with the
    decode's warnings on stderr, and the Reading that made it (finish() it once the report is out); or exit
    with a one-line error: nothing could be read (1), no Fetch exchange in it (reading.NO_TRAFFIC). ``tap``:
    items -> the same items, to count more on the way (the embedded engine only). ``sessions``: list at most
    this many sessions (analysis.shown; None: all); the embedded engine without --client / --broker keeps only
    those in memory."""
    from fetchtool.analysis import run as analysis_run
    from fetchtool.analysis.run import analyze_items, bounded, filtered, savings_filter
    from fetchtool.commands.output import (bad_option, check_ports, check_positive, fail, warn, warn_empty_shards,
                                          warn_if_nothing_matched)
    from fetchtool.commands.reading import Reading
    from fetchtool.decoder import CaptureError
    from fetchtool.protocol.report import warning_lines
    from fetchtool.sessions.cache import DEFAULT_EVICTION_MS, DEFAULT_SHARDS

    check_ports(ports)
    check_positive(cache_slots, "--cache-slots", 0, strict=False)
    check_positive(cache_shards, "--cache-shards", 1, strict=False)
    if cache_slots is not None:
        warn_empty_shards(cache_slots, cache_shards or DEFAULT_SHARDS)
    check_positive(eviction_ms, "--eviction-ms", 0, strict=False)
    if eviction_ms is not None and engine == "spark":
        bad_option("--eviction-ms is not supported with --engine spark")
    paths = [str(p) for p in captures]
    reading = Reading(captures, ports, window)
    try:
        if engine == "spark":  # the same analysis as Spark stages (fetchtool.pipeline.spark)
            from fetchtool.pipeline.spark import SparkUnavailable, analyze_spark, stage_lines

            try:
                analysis = bounded(analyze_spark(paths, master=master, ports=ports or None, cache_slots=cache_slots,
                                                 cache_shards=cache_shards, client=client, broker=broker,
                                                 window=window, verbose=verbose, progress=stage_lines(verbose)),
                                   sessions)
            except SparkUnavailable as exc:
                fail(str(exc))
        else:
            # analyze_capture's steps, with the items read through the Reading (window, progress, Ctrl-C);
            # --client / --broker count sessions again from all of them (filtered), then bound the list
            # (a capture decoded in a child has its savings estimated in a process of their own: savings_apart)
            kept = client or broker
            savings_of = savings_filter(client, broker)
            keeps = reading.window.keeps if reading.window else None  # (the window Reading.items applies)
            side = reading.run.side = analysis_run.savings_apart(savings_of, keeps)
            analysis = filtered(analyze_items(
                (tap or iter)(reading.items()), cache_slots=cache_slots, cache_shards=cache_shards, decode_report=reading.report,
                savings_of=savings_of, eviction_ms=DEFAULT_EVICTION_MS if eviction_ms is None else eviction_ms,
                ended=reading.run.ended, sessions=None if kept else sessions, savings_side=side), client, broker)
            if kept:
                analysis = bounded(analysis, sessions)
    except CaptureError as exc:
        fail(str(exc) or "the capture could not be read")
    for line in warning_lines(analysis.capture.decode):
        warn(line)
    if engine == "spark" and not analysis.capture.exchanges:
        _read_for_the_hint(reading)
    reading.require_traffic(analysis.capture.exchanges if engine == "spark" else None)
    warn_if_nothing_matched(bool(analysis.clients), client, broker)
    return analysis, reading


def sessions_option():
    return typer.Option(None, "--sessions", help=f"how many sessions the report lists, those that failed first "
                                                 f"(default {SESSIONS_LISTED:,}; 'all': every one)")


def sessions_limit(value: str | None) -> int | None:
    """--sessions N | all (one-line error otherwise)."""
    from fetchtool.analysis.shown import parse_sessions
    from fetchtool.commands.output import bad_option

    try:
        return parse_sessions(value)
    except ValueError:
        bad_option(f"--sessions must be a number >= 0 or 'all', not {value!r}")


def _read_for_the_hint(reading: Reading) -> None:
    """Spark found no Fetch exchange: read the capture here too (the failure path only), so that the hint says
    what the capture carried, as it does for the embedded engine."""
    from fetchtool.decoder import CaptureError

    try:
        for _item in reading.items():
            pass
    except CaptureError:
        pass


def render(analysis: Analysis, format: str, output: Path | None, width: int | None,
           interrupted: bool = False) -> None:
    """The report in `format`, to stdout or --output; JSON and markdown say which fetchtool made them."""
    import json

    from fetchtool.analysis.reports import markdown as markdown_report
    from fetchtool.analysis.reports import terminal as terminal_report
    from fetchtool.commands.output import emit, report_console
    from fetchtool.commands.stamp import made_by, stamp_json, stamp_markdown

    if format == "json":
        # the report's dict stamped as it is (json_report.render's text, parsed again, is the same document:
        # encoding it with indent, in Python, twice cost a second on a 100,000-session capture)
        doc = stamp_json(analysis.to_json())
        if interrupted:
            doc["interrupted"] = True  # the report covers the capture up to where Ctrl-C stopped the reading
        text = json.dumps(doc, indent=2) + "\n"
    elif format == "markdown":
        text = stamp_markdown(markdown_report.render(analysis))
    elif format == "html":  # one self-contained page (charts inlined): to attach to a ticket
        from fetchtool.analysis.reports.html import render as render_html

        text = render_html(analysis, made_by())
    else:
        if output is None:
            terminal_report.render(analysis, report_console(width=width))
            return
        buf = io.StringIO()
        terminal_report.render(analysis, report_console(buf, width=width))
        text = buf.getvalue()
    emit(text, output)


def main(
    capture: List[Path] = typer.Argument(..., help="pcap / pcapng files (gzip accepted); with --engine spark also "
                                                   "directories, globs and URIs Spark reads"),
    format: str = typer.Option("table", "--format", "-f", help="table | json | markdown | html (one self-contained "
                                                               "page with charts, to attach to a ticket)"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="write the report to this file"),
    client: Optional[str] = typer.Option(None, "--client", help="only this client (client id, host or ip:port)"),
    broker: Optional[str] = typer.Option(None, "--broker", help="only this broker (ip:port or host)"),
    port: Optional[List[int]] = typer.Option(None, "--port", help="broker port (repeatable); default: detect"),
    cache_slots: Optional[int] = typer.Option(
        None, "--cache-slots", help="the brokers' max.incremental.fetch.session.cache.slots (default: infer)"),
    cache_shards: Optional[int] = typer.Option(
        None, "--cache-shards", help="fetch session cache shards (8 since Kafka 3.8, 1 before; default 8 with "
                                     "--cache-slots)"),
    eviction_ms: Optional[int] = typer.Option(
        None, "--eviction-ms", help="how long a session must be unused before a newcomer may evict it (Kafka: "
                                    "120000, not a config; set it for a broker that differs, e.g. fetchtool broker)"),
    engine: str = typer.Option("polars", "--engine", help="polars (embedded) | spark (pip install 'fetchtool\\[spark]')"),
    master: Optional[str] = typer.Option(None, "--master", help="Spark master URL with --engine spark (default local[*])"),
    since: Optional[str] = since_option(),
    until: Optional[str] = until_option(),
    width: Optional[int] = width_option(),
    sessions: Optional[str] = sessions_option(),
    verbose: bool = typer.Option(False, "--verbose", help="with --engine spark: Spark's own log on stderr"),
) -> None:
    from fetchtool.commands.output import bad_option, check_choice, report_console
    from fetchtool.commands.window import time_window

    check_choice(format, "--format", FORMATS)
    limit = sessions_limit(sessions)
    check_choice(engine, "--engine", ENGINES)
    if master and engine != "spark":
        bad_option("--master needs --engine spark")
    report_console(width=width)  # a bad --width fails before the capture is read
    analysis, reading = load(capture, port, cache_slots, cache_shards, client, broker, engine, master, eviction_ms,
                             time_window(since, until, capture), sessions=limit, verbose=verbose)
    render(analysis, format, output, width, reading.interrupted)
    reading.finish()
