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
from fetchtool.pipeline.jsonl import jsonl_line

if TYPE_CHECKING:
    from rich.console import Console

    from fetchtool.commands.exchange_table import ExchangeRows
    from fetchtool.commands.window import TimeWindow
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
    rows: ExchangeRows | None = None
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
                rows = rows or _exchange_rows()
                rows.add(item)
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
    if rows is not None:
        from fetchtool.commands.exchange_table import print_exchange_table

        print_exchange_table(report_console(width=width), rows)
        rows.close()
    for line in reading.report.lines():
        err.print(line, highlight=False, markup=False)
    reading.require_traffic()
    if tables is not None:
        err.print(f"wrote {count(tables.exchanges_written, 'exchange')} and "
                  f"{count(tables.partitions_written, 'partition row')} to {out}/", highlight=False)
    reading.finish()


def _exchange_rows() -> ExchangeRows:
    from fetchtool.commands.exchange_table import ExchangeRows

    return ExchangeRows()


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
