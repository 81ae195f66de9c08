"""Estimate what incremental fetch sessions (KIP-227) save: exact bytes per client and broker, per hour, and at
10x / 100x the partitions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from fetchtool.commands.output import emit, fail

FORMATS = ("table", "json", "jsonl", "markdown")


def _matches(ex, client: str | None, broker: str | None) -> bool:
    if client and client not in (ex.client_id, ex.client, ex.client.rsplit(":", 1)[0]):
        return False
    if broker and broker not in (ex.broker, ex.broker.rsplit(":", 1)[0]):
        return False
    return True


def main(
    capture: List[Path] = typer.Argument(..., help="pcap / pcapng files (gzip accepted)"),
    format: str = typer.Option("table", "--format", "-f",
                               help="table | json | markdown | jsonl (one line per Fetch exchange)"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="write the report to this file"),
    client: Optional[str] = typer.Option(None, "--client", help="only this client (client id, host or ip:port)"),
    broker: Optional[str] = typer.Option(None, "--broker", help="only this broker (ip:port or host)"),
    port: Optional[List[int]] = typer.Option(None, "--port", help="broker port (repeatable); default: detect"),
) -> None:
    from fetchtool.analysis import savings_report
    from fetchtool.analysis.savings import SavingsEstimator
    from fetchtool.decoder import CaptureError, decode_capture
    from fetchtool.exchange import Exchange

    if format not in FORMATS:
        fail(f"unknown --format {format!r} (choose from {', '.join(FORMATS)})")
    est = SavingsEstimator()
    lines: list[str] = []
    try:
        for ex in decode_capture([str(p) for p in capture], port or None):
            if isinstance(ex, Exchange) and _matches(ex, client, broker):
                row = est.feed(ex)
                if row is not None and format == "jsonl":
                    lines.append(json.dumps(row.to_json()))
    except CaptureError as exc:
        fail(str(exc).splitlines()[0] if str(exc) else "the capture could not be read")
    result = est.result().to_json()
    if format == "jsonl":
        text = "\n".join(lines) + ("\n" if lines else "")
    elif format == "json":
        text = json.dumps(result, indent=2) + "\n"
    elif format == "markdown":
        text = "\n".join(savings_report.markdown(result)) + "\n"
    else:
        if output is None:
            Console().print(savings_report.terminal(result))
            return
        import io

        console = Console(width=160, record=True, force_terminal=False, file=io.StringIO())
        console.print(savings_report.terminal(result))
        text = console.export_text()
    emit(text, output)
