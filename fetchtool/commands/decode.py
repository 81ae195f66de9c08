"""Decode Kafka Fetch and FetchSnapshot exchanges from captures: JSONL or a table on stdout, Parquet with --out."""

from __future__ import annotations

import sys
from contextlib import suppress
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from fetchtool.commands.options import since_option, until_option, width_option
from fetchtool.commands.wording import count
from fetchtool.pipeline import ENGINES
from fetchtool.pipeline.jsonl import jsonl_line, latency_ms
from fetchtool.printable import one_line

if TYPE_CHECKING:
    from rich.console import Console

    from fetchtool.commands.window import TimeWindow
    from fetchtool.exchange import Exchange
    from fetchtool.pipeline.tables import ParquetTables

# What decoding needs is imported inside the functions that use it: `decode --help` imports none of it.


class Format(str, Enum):
    jsonl = "jsonl"
    table = "table"


def main(
    captures: list[Path] = typer.Argument(..., help="pcap / pcapng files, optionally gzip-compressed."),
    format: Format | None = typer.Option(
        None, "--format", "-f", help="stdout format: jsonl (default without --out) or table."
    ),
    out: Path | None = typer.Option(None, "--out", help="Write exchanges.parquet and partitions.parquet here "
                                    "(--engine spark: the exchanges, partitions, sessions and findings datasets)."),
    port: list[int] | None = typer.Option(
        None, "--port", help="Broker port (repeatable). Default: detect the broker side from the traffic."
    ),
    engine: str = typer.Option("polars", "--engine", help="polars (embedded) | spark (with --out; pip install "
                                                          "'fetchtool\\[spark]')."),
    master: str | None = typer.Option(None, "--master", help="Spark master URL with --engine spark."),
    since: str | None = since_option(),
    until: str | None = until_option(),
    width: int | None = width_option(),
    verbose: bool = typer.Option(False, "--verbose", help="with --engine spark: Spark's own log on stderr."),
) -> None:

    from fetchtool.commands.output import bad_option, check_choice, check_ports, error_console, fail, report_console
    from fetchtool.commands.reading import Reading
    from fetchtool.commands.window import time_window
    from fetchtool.decoder import CaptureError
    from fetchtool.exchange import Exchange

    err = error_console(soft_wrap=True)  # one message, one line: never wrapped
    check_ports(port)
    check_choice(engine, "--engine", ENGINES)
    report_console(width=width)  # a bad --width fails before the capture is read
    window = time_window(since, until, captures)
    if engine == "spark":
        return _decode_on_spark(captures, out, format, port, master, err, window, verbose)
    if master:
        bad_option("--master needs --engine spark")
    if format is None and out is None:
        format = Format.jsonl
    # The Kafka layer here (see Reading). JSONL and the table show each exchange's counts, never a partition's
    # fields: the Parquet tables take the entries' fields as the wire packs them (protocol/packed.py).
    reading = Reading(captures, port, window, decode_in_child=False, rows=False if out is None else "packed")
    tables: ParquetTables | None = None
    if out is not None:
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            fail(f"cannot write {out}: {exc.strerror or exc}")
    rows: list[Exchange] = []
    write = sys.stdout.write
    try:
        for item in reading.items():
            if not isinstance(item, Exchange):
                continue  # responses without a request: counted in the report
            if out is not None:
                # pyarrow is imported at the first exchange, not before the reading: the capture's reader (a
                # forked child on a large capture) reads ahead meanwhile, the import no longer in its way
                tables = tables or _parquet_tables(out)
                tables.add(item)
            if format is Format.jsonl:
                write(jsonl_line(item))
            elif format is Format.table:
                rows.append(item)
        if out is not None:
            tables = tables or _parquet_tables(out)  # no exchange: both tables still written, empty
            tables.close()  # the last rows: a full disk is reported here like any other write
    except CaptureError as exc:
        fail(str(exc))
    except OSError as exc:   # --out: the disk filled up or the directory went away (a closed stdout: fetchtool.cli)
        if isinstance(exc, BrokenPipeError):
            raise
        fail(f"cannot write {out}: {exc.strerror or exc}")
    finally:
        if out is not None and tables is None:
            with suppress(OSError):  # a capture that failed before its first exchange still leaves both tables
                tables = _parquet_tables(out)
        if tables is not None:
            tables.close()
    if format is Format.table and rows:
        console = report_console(width=width)
        console.print(exchange_table(rows, console.width))
    for line in reading.report.lines():
        err.print(line, highlight=False, markup=False)
    reading.require_traffic()
    if tables is not None:
        err.print(f"wrote {count(tables.exchanges_written, 'exchange')} and "
                  f"{count(tables.partitions_written, 'partition row')} to {out}/", highlight=False)
    reading.finish()


def _parquet_tables(out: Path) -> ParquetTables:
    from fetchtool.pipeline.tables import ParquetTables

    return ParquetTables(out)


def _decode_on_spark(captures: list[Path], out: Path | None, format: Format | None, ports: list[int] | None,
                     master: str | None, err: Console, window: TimeWindow, verbose: bool = False) -> None:
    """--engine spark: the exchanges, partitions, sessions and findings datasets (Parquet directories
    partitioned by capture date and broker: fetchtool.pipeline.spark_datasets)."""
    from fetchtool.commands.output import bad_option, fail
    from fetchtool.commands.reading import Reading
    from fetchtool.decoder import CaptureError
    from fetchtool.pipeline.spark import SparkUnavailable, decode_spark, stage_lines

    if out is None or format is not None:
        bad_option("--engine spark writes the exchanges and partitions tables as Parquet: give --out DIR "
                   "(and no --format)")
    try:
        rep = decode_spark([str(p) for p in captures], str(out), master=master, ports=ports or None, window=window,
                           verbose=verbose, progress=stage_lines(verbose))
    except (SparkUnavailable, CaptureError) as exc:
        fail(str(exc))
    for line in rep.lines():
        err.print(line, highlight=False, markup=False)
    reading = Reading(captures, ports, window)
    reading.run.report = rep
    reading.require_traffic(rep.exchanges_written)
    err.print(f"wrote {count(rep.exchanges_written, 'exchange')} and {count(rep.partitions_written, 'partition row')}"
              f" to {out}/ (Spark Parquet datasets)", highlight=False)


# Below this many columns the full table (16 columns) would be cut to "1…" in every cell: a narrower one instead.
WIDE_TABLE = 160


def exchange_table(exchanges: list[Exchange], width: int = WIDE_TABLE):
    """The exchanges, one a row. Narrower than WIDE_TABLE: time, frames, latency, client id, session and
    epoch, partitions, error and record bytes only (--format jsonl has everything), as a table when those fit
    whole, else each exchange's fields wrapped beside its time (analysis.reports.fit.Steps): no id is cut."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from fetchtool.analysis.reports.fit import Steps
    from fetchtool.analysis.reports.timefmt import utc

    days = {utc(ex.ts, "%Y-%m-%d") for ex in exchanges if ex.ts is not None}
    one_day = len(days) == 1
    clock = f"{next(iter(days))} UTC" if one_day else "time (UTC)"  # the date once, in the header, as `sessions`
    title = count(len(exchanges), "exchange")
    rows = []
    wide = width >= WIDE_TABLE
    for ex in exchanges:
        when = None if ex.ts is None else utc(ex.ts, "%H:%M:%S.%f" if one_day else "%Y-%m-%d %H:%M:%S.%f")
        latency = latency_ms(ex)
        ms = None if latency is None else f"{latency:,.1f}"
        cells: tuple[object, ...]
        if wide:
            api = ("Fetch" if ex.api_key == 1 else "FetchSnapshot") + f" v{ex.api_version}"
            cells = (when, ex.request_frame, ex.response_frame, ms, ex.client, ex.client_id, ex.broker, api,
                     ex.session_id, ex.session_epoch, ex.partitions, ex.forgotten, ex.response_session_id,
                     ex.error_code, ex.response_partition_count, _thousands(ex.records_bytes))
        else:
            cells = (when, f"{ex.request_frame}/{_cell(ex.response_frame)}", f"{ms or '-'} ms", ex.client_id,
                     f"{_cell(ex.session_id)}:{_cell(ex.session_epoch)}", f"{ex.partitions}-{ex.forgotten}",
                     ex.error_code, f"{_thousands(ex.records_bytes)} B")
        rows.append(tuple(_cell(v) for v in cells))
    if not wide:
        head = (clock, "frames", "latency", "client id", "session:epoch", "parts", "error", "records")
        return Group(Steps(head, rows, title),
                     Text("parts: partitions sent - forgotten; --width 160 or more for every column", style="dim"))
    table = Table(title=title, show_lines=False)
    table.add_column(clock, no_wrap=True)
    for col in ("req", "resp", "ms", "client", "client id", "broker", "api", "session", "epoch", "parts", "forgot",
                "resp session", "error", "resp parts", "records B"):
        table.add_column(col, justify="left" if col in ("client", "client id", "broker", "api") else "right",
                         overflow="fold")
    for r in rows:
        table.add_row(*r)
    return table


def _thousands(value):
    return f"{value:,}" if isinstance(value, int) else value


def _cell(value) -> str:
    return "-" if value is None else one_line(str(value))  # a newline in a client id forges no row
