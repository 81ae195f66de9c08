"""Write a synthetic scenario capture (real wire bytes; both sides from the session engine) and its expected findings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from fetchtool.synth.scenarios import SCENARIOS, generate


def main(
    scenario: Optional[str] = typer.Argument(None, help="scenario name; omit (or --list) to list them"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="capture file to write (.pcap)"),
    expected: Optional[Path] = typer.Option(None, "--expected", help="also write the expected findings (JSON)"),
    list_: bool = typer.Option(False, "--list", help="list the scenarios"),
) -> None:
    if list_ or scenario is None:
        for name, (_, description) in SCENARIOS.items():
            typer.echo(f"{name}: {description}")
        return
    if scenario not in SCENARIOS:
        typer.echo(f"error: unknown scenario {scenario!r} (choose from {', '.join(SCENARIOS)})", err=True)
        raise typer.Exit(1)
    if output is None:
        typer.echo("error: -o/--output FILE is required", err=True)
        raise typer.Exit(1)
    try:
        exp = generate(scenario, output)
        if expected is not None:
            expected.write_text(json.dumps({"scenario": scenario, "findings": exp}, indent=2) + "\n")
    except OSError as exc:
        typer.echo(f"error: cannot write {exc.filename}: {exc.strerror}", err=True)
        raise typer.Exit(1)
    typer.echo(f"{output}: scenario {scenario}, {len(exp)} expected finding(s)")
