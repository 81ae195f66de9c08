"""Write a synthetic scenario capture (real wire bytes; both sides from the session engine) and its expected findings."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

# The scenarios (the session engine, kio's wire format) are imported inside main: `synth --help` imports neither.


def main(
    scenario: Optional[str] = typer.Argument(None, help="scenario name; omit (or --list) to list them"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="capture file to write (.pcap)"),
    expected: Optional[Path] = typer.Option(None, "--expected", help="also write the expected findings (JSON)"),
    list_: bool = typer.Option(False, "--list", help="list the scenarios"),
) -> None:
    import json

    from fetchtool.commands.output import bad_option, check_choice, fail
    from fetchtool.synth.scenarios import SCENARIOS, generate

    if list_ or scenario is None:
        for name, (_, description) in SCENARIOS.items():
            typer.echo(f"{name}: {description}")
        return
    check_choice(scenario, "scenario", tuple(SCENARIOS))
    if output is None:
        bad_option("-o/--output FILE is required")
    try:
        exp = generate(scenario, output)
        if expected is not None:
            expected.write_text(json.dumps({"scenario": scenario, "findings": exp}, indent=2) + "\n")
    except OSError as exc:
        fail(f"cannot write {exc.filename}: {exc.strerror}")
    typer.echo(f"{output}: scenario {scenario}, {len(exp)} expected finding(s)")
