"""Replay a capture's fetches against a broker, at the Kafka layer, through fetchtool's session engine.

Each captured client is re-created with its own connection, fresh correlation ids and its captured session
behaviour (a Java-style session client, a (0,0)-every-time client, a sessionless client); the broker hands out
live session ids. Without --broker an in-process `fetchtool broker` is started on a free loopback port with the
capture's topics and the given cache settings, its clock running --speed times faster. The report compares
errors, sessions and bytes with the capture, client by client. Ctrl-C stops with a partial report.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Optional

import typer

from fetchtool.commands.options import since_option, until_option, width_option
from fetchtool.commands.defaults import CACHE_SHARDS, CACHE_SLOTS, EVICTION_MS

# What replaying needs (asyncio, the driver, the embedded broker) is imported inside main: `replay --help`
# imports none of it.


def main(
    capture: list[Path] = typer.Argument(..., help="pcap/pcapng file(s) with Kafka Fetch traffic."),
    broker: str = typer.Option(None, "--broker", metavar="HOST:PORT", help="the broker to replay against "
                               "(default: an embedded fetchtool broker)."),
    cache_slots: int = typer.Option(CACHE_SLOTS, "--cache-slots", help="embedded broker: cache slots."),
    cache_shards: int = typer.Option(CACHE_SHARDS, "--cache-shards", help="embedded broker: cache shards."),
    eviction_ms: int = typer.Option(EVICTION_MS, "--eviction-ms", help="embedded broker: eviction ms."),
    speed: float = typer.Option(1.0, "--speed", help="replay this many times faster than captured."),
    as_fast: bool = typer.Option(False, "--as-fast-as-possible", help="no pacing; keep the captured order."),
    sessions: str = typer.Option("as-captured", "--sessions", help="as-captured | on | off"),
    create_topics: bool = typer.Option(False, "--create-topics", help="create missing topics on --broker, with "
                                       "records up to the capture's (rebased) offsets."),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the plan (clients, requests, duration) only."),
    port: list[int] = typer.Option(None, "--port", help="Kafka port(s) in the capture (default: detect)."),
    timeout: float = typer.Option(30.0, "--timeout", help="seconds to wait for each response."),
    fmt: str = typer.Option("table", "--format", "-f", help="table | json | markdown"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="write the report to this file"),
    since: Optional[str] = since_option(),
    until: Optional[str] = until_option(),
    width: Optional[int] = width_option(),
) -> None:
    from fetchtool.commands.output import (bad_option, check_choice, check_ports, check_positive, emit,
                                          error_console, fail, plan_or_fail, report_console, warn_empty_shards)
    from fetchtool.commands.reading import Reading, interrupted_exit
    from fetchtool.commands.replay_markdown import replay_markdown
    from fetchtool.commands.stamp import stamp_json, stamp_markdown
    from fetchtool.commands.window import time_window
    from fetchtool.replay.clients import SESSION_MODES
    from fetchtool.replay.jsonout import json_text
    from fetchtool.replay.plan import LATER
    from fetchtool.replay.report import plan_summary_lines, print_replay, replay_json

    err = error_console()
    check_choice(fmt, "--format", ("table", "json", "markdown"))
    check_choice(sessions, "--sessions", SESSION_MODES)
    check_positive(speed, "--speed")
    check_positive(timeout, "--timeout")
    check_positive(cache_slots, "--cache-slots", 0, strict=False)
    check_positive(cache_shards, "--cache-shards", 1, strict=False)
    check_positive(eviction_ms, "--eviction-ms", 0, strict=False)
    check_ports(port)
    if broker is None:
        warn_empty_shards(cache_slots, cache_shards)  # the embedded broker's cache
    else:
        from fetchtool.replay.driver import parse_broker

        try:
            parse_broker(broker)  # the driver parses it again; here a bad value fails before the capture is read
        except ValueError as exc:
            bad_option(str(exc))
    report_console(width=width)  # a bad --width fails before the capture is read
    reading = Reading(capture, port, time_window(since, until, capture))
    # --dry-run prints the plan's shape only; a replay reads the captured log state once before it starts
    # (driver.captured_log), so the plan holds no step's reads
    plan = plan_or_fail(reading, "replay", with_reads=False if dry_run else LATER)
    reading.finish()  # Ctrl-C while reading the capture: nothing was replayed, nothing to report
    if dry_run:
        if fmt == "json":
            emit(json_text(stamp_json({"plan": plan.summary(), "expected_duration_s": None if as_fast else
                                       round(plan.duration_ms / 1000 / speed, 3)})), output)
        else:
            lines = plan_summary_lines(plan, None if as_fast else speed)
            text = "\n".join(lines) + "\n"
            emit(stamp_markdown("# Replay plan\n\n" + "\n".join(f"- {line.strip()}" for line in lines) + "\n")
                 if fmt == "markdown" else text, output)
        return
    # a replay proper: the driver, its asyncio loop and (without --broker) the embedded broker
    import asyncio

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from fetchtool.replay.driver import ReplayError, ReplayOptions, ReplayRun, replay
    from fetchtool.replay.simulate import SimConfig

    options = ReplayOptions(broker=broker, config=SimConfig(cache_slots, cache_shards, eviction_ms), speed=speed,
                            as_fast=as_fast, sessions=sessions, create_topics=create_topics, timeout_s=timeout,
                            release_plan=True)
    run = ReplayRun(plan, options)
    progress = Progress(TextColumn("replaying"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=err, transient=True, disable=not err.is_terminal)
    try:
        with progress:
            task = progress.add_task("replay", total=plan.requests)
            asyncio.run(replay(plan, options, run, lambda n: progress.update(task, completed=n)))
    except KeyboardInterrupt:
        run.interrupted = True
    except ReplayError as exc:
        fail(str(exc))
    captured = run.captured_counts()
    doc = stamp_json(replay_json(run, captured))
    if fmt == "json":
        emit(json_text(doc), output)  # in pieces: a storm's report (91 MB) is never held whole
    elif fmt == "markdown":
        emit(stamp_markdown(replay_markdown(doc)), output)
    else:
        buf = None if output is None else io.StringIO()
        print_replay(report_console(buf, width=width), run, captured)
        if buf is not None:
            emit(buf.getvalue(), output)
    if run.interrupted:
        interrupted_exit(done="replayed")

