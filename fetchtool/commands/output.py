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
