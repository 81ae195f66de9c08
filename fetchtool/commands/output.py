"""Where a command's report goes, and how it fails: one line on stderr, never a traceback."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

import typer


def fail(message: str, code: int = 1) -> NoReturn:
    # typer.echo, not rich: a message must stay one line (rich wraps at the terminal width) and a '[' in a file
    # name must not be taken for markup.
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def warn(message: str) -> None:
    typer.echo(f"warning: {message}", err=True)


def emit(text: str, output: Path | None) -> None:
    """The report to stdout, or to --output FILE."""
    if output is None:
        typer.echo(text, nl=False)
        return
    try:
        output.write_text(text)
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror or exc}")


def plan_or_fail(capture: list[Path], ports: list[int] | None, what: str):
    """The replay plan of the capture files for simulate and replay; decode warnings go to stderr, one line each.
    Fails with one line when nothing can be read or the capture has no Fetch exchange to `what` (a verb)."""
    from fetchtool.replay.loading import CaptureError, load_plan  # only the commands that plan pay for it

    try:
        plan, warnings = load_plan(capture, ports or None)
    except CaptureError as exc:
        fail(str(exc))
    for w in warnings:
        warn(w)
    if not plan.streams:
        fail(f"no Fetch exchanges in the capture: nothing to {what}")
    return plan
