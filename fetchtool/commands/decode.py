"""Decode Kafka Fetch and FetchSnapshot exchanges from captures: JSONL or a table on stdout, Parquet with --out."""

from __future__ import annotations

import json
import os
import sys
from enum import Enum
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from fetchtool.commands.output import bad_option, check_choice, check_ports, fail, report_console
from fetchtool.commands.progress import CaptureProgress
from fetchtool.decoder import CaptureError, decode_capture
from fetchtool.exchange import Exchange
from fetchtool.pipeline import ENGINES


class Format(str, Enum):
    jsonl = "jsonl"
    table = "table"


def main(
    captures: list[Path] = typer.Argument(..., help="pcap / pcapng files, optionally gzip-compressed."),
    format: Format | None = typer.Option(
        None, "--format", "-f", help="stdout format: jsonl (default without --out) or table."
    ),
    out: Path | None = typer.Option(None, "--out", help="Write exchanges.parquet and partitions.parquet here."),
    port: list[int] | None = typer.Option(
        None, "--port", help="Broker port (repeatable). Default: detect the broker side from the traffic."
    ),
    engine: str = typer.Option("polars", "--engine", help="polars (embedded) | spark (with --out; pip install "
                                                          "'fetchtool\\[spark]')."),
    master: str | None = typer.Option(None, "--master", help="Spark master URL with --engine spark."),
) -> None:
    err = Console(stderr=True, soft_wrap=True)  # one message, one line: never wrapped
    check_ports(port)
    check_choice(engine, "--engine", ENGINES)
    if engine == "spark":
        return _decode_on_spark(captures, out, format, port, master, err)
    if master:
        bad_option("--master needs --engine spark")
    if format is None and out is None:
        format = Format.jsonl
    run = decode_capture(captures, ports=port or None)
    tables = None
    if out is not None:
        from fetchtool.pipeline.tables import ParquetTables

        try:
            tables = ParquetTables(out)
        except OSError as exc:
            fail(f"cannot write {out}: {exc.strerror or exc}")
    rows: list[Exchange] = []
    write = sys.stdout.write
    try:
        with CaptureProgress(captures, err) as progress:
            for item in run:
                if not isinstance(item, Exchange):
                    continue  # responses without a request: counted in the report
                progress.advance(item)
                if tables is not None:
                    tables.add(item)
                if format is Format.jsonl:
                    write(json.dumps(item.to_json_row()) + "\n")
                elif format is Format.table:
                    rows.append(item)
    except CaptureError as exc:
        fail(str(exc))
    except BrokenPipeError:
        # the reader went away (`fetchtool decode x | head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise typer.Exit(0) from None
    except OSError as exc:   # --out: the disk filled up or the directory went away
        fail(f"cannot write {out}: {exc.strerror or exc}")
    finally:
        if tables is not None:
            tables.close()
    if format is Format.table:
        report_console().print(exchange_table(rows))
    for line in run.report.lines():
        err.print(line, highlight=False, markup=False)
    if tables is not None:
        err.print(f"wrote {tables.exchanges_written:,} exchanges and {tables.partitions_written:,} partition rows "
                  f"to {out}/", highlight=False)


def _decode_on_spark(captures: list[Path], out: Path | None, format: Format | None, ports: list[int] | None,
                     master: str | None, err: Console) -> None:
    """--engine spark: the same two tables, written by Spark as Parquet datasets (directories)."""
    from fetchtool.pipeline.spark import SparkUnavailable, decode_spark

    if out is None or format is not None:
        bad_option("--engine spark writes the exchanges and partitions tables as Parquet: give --out DIR "
                   "(and no --format)")
    try:
        rep = decode_spark([str(p) for p in captures], str(out), master=master, ports=ports or None)
    except (SparkUnavailable, CaptureError) as exc:
        fail(str(exc))
    for line in rep.lines():
        err.print(line, highlight=False, markup=False)
    err.print(f"wrote {rep.exchanges_written:,} exchanges and {rep.partitions_written:,} partition rows to {out}/ "
              "(Spark Parquet datasets)", highlight=False)


def exchange_table(exchanges: list[Exchange]) -> Table:
    table = Table(title=f"{len(exchanges):,} exchanges", show_lines=False)
    for col, justify in [("req", "right"), ("resp", "right"), ("client", "left"), ("broker", "left"),
                         ("api", "left"), ("session", "right"), ("epoch", "right"), ("parts", "right"),
                         ("forgot", "right"), ("resp session", "right"), ("error", "right"),
                         ("resp parts", "right"), ("records B", "right")]:
        table.add_column(col, justify=justify)
    for ex in exchanges:
        api = ("Fetch" if ex.api_key == 1 else "FetchSnapshot") + f" v{ex.api_version}"
        table.add_row(*(_cell(v) for v in (ex.request_frame, ex.response_frame, ex.client, ex.broker, api,
                                           ex.session_id, ex.session_epoch, ex.partitions, ex.forgotten,
                                           ex.response_session_id, ex.error_code, ex.response_partition_count,
                                           ex.records_bytes)))
    return table


def _cell(value) -> str:
    return "-" if value is None else str(value)
