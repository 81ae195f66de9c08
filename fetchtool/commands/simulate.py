"""Replay a capture's fetch workload through the broker-side session engine in memory, with other cache settings.

Answers "with max.incremental.fetch.session.cache.slots=2000, do the FETCH_SESSION_ID_NOT_FOUND errors stop?":
every client's fetches run on simulated time (as fast as possible) against each configuration, and the report
puts sessions created, evictions, errors 70/71, the incremental share and bytes next to what the capture shows.
Give several values (--cache-slots 1000,2000,4000) to compare configurations in one run.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Optional

import typer

from fetchtool.commands.options import since_option, until_option, width_option
from fetchtool.commands.defaults import CACHE_SHARDS, CACHE_SLOTS, EVICTION_MS

# What simulating needs is imported inside main: `simulate --help` imports none of it.

FORMATS = ("table", "json", "markdown")


def main(
    capture: list[Path] = typer.Argument(..., help="pcap/pcapng file(s) with Kafka Fetch traffic."),
    cache_slots: str = typer.Option(str(CACHE_SLOTS), "--cache-slots",
                                    help="max.incremental.fetch.session.cache.slots; comma-separated to compare."),
    cache_shards: str = typer.Option(str(CACHE_SHARDS), "--cache-shards",
                                     help="cache shards (8 since Kafka 3.8, 1 before); comma-separated to compare."),
    eviction_ms: str = typer.Option(str(EVICTION_MS), "--eviction-ms",
                                    help="session eviction time (Kafka: 120000, not configurable); comma-separated."),
    sessions: str = typer.Option("as-captured", "--sessions",
                                 help="as-captured | on (every client uses sessions) | off (every client sessionless)."),
    port: list[int] = typer.Option(None, "--port", help="Kafka port(s) in the capture (default: detect)."),
    seed: int = typer.Option(0, "--seed", help="seed for the session ids the simulated brokers hand out."),
    fmt: str = typer.Option("table", "--format", "-f", help="table | json | markdown"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="write the report to this file"),
    since: Optional[str] = since_option(),
    until: Optional[str] = until_option(),
    width: Optional[int] = width_option(),
) -> None:
    from fetchtool.commands.output import (check_choice, check_ports, emit, int_list_option, plan_or_fail,
                                          report_console, warn_empty_shards)
    from fetchtool.commands.reading import Reading
    from fetchtool.commands.replay_markdown import simulate_markdown
    from fetchtool.commands.stamp import stamp_json, stamp_markdown
    from fetchtool.commands.window import time_window
    from fetchtool.replay.clients import SESSION_MODES
    from fetchtool.replay.plan import LATER_IF_MANY
    from fetchtool.replay.report import print_simulate, simulate_json
    from fetchtool.replay.simulate import SimConfig, simulate_many
    from fetchtool.replay.tally import captured_counts

    check_choice(fmt, "--format", FORMATS)
    check_choice(sessions, "--sessions", SESSION_MODES)
    check_ports(port)
    slots = int_list_option(cache_slots, "--cache-slots", minimum=0)
    shards = int_list_option(cache_shards, "--cache-shards", minimum=1)
    evictions = int_list_option(eviction_ms, "--eviction-ms", minimum=0)
    configs = [SimConfig(s, k, e) for s in slots for k in shards for e in evictions]
    for s, k in dict.fromkeys((c.cache_slots, c.cache_shards) for c in configs):
        warn_empty_shards(s, k)
    report_console(width=width)  # a bad --width fails before the capture is read
    reading = Reading(capture, port, time_window(since, until, capture))
    # A big capture's reads are made step by step while simulating, so that memory stays bounded (replay.plan)
    plan = plan_or_fail(reading, "simulate", with_reads=LATER_IF_MANY)
    captured = captured_counts(plan)
    results = simulate_many(plan, configs, sessions, seed)  # one worker per core when several configs are asked
    if fmt in ("json", "markdown"):
        doc = stamp_json(simulate_json(plan, captured, results))
        if reading.interrupted:
            doc["interrupted"] = True  # the capture was read up to Ctrl-C: the plan holds what was read
    if fmt == "json":
        from fetchtool.replay.jsonout import json_text

        emit(json_text(doc), output)  # in pieces: a storm's report is never held whole
    elif fmt == "markdown":
        emit(stamp_markdown(simulate_markdown(doc)), output)
    else:
        buf = None if output is None else io.StringIO()
        print_simulate(report_console(buf, width=width), plan, captured, results)
        if buf is not None:
            emit(buf.getvalue(), output)
    reading.finish()
