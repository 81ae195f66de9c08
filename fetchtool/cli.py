"""The `fetchtool` command: a thin typer shell over the command modules in fetchtool.commands."""

from __future__ import annotations

import gc
import importlib
import importlib.util

import typer

app = typer.Typer(
    name="fetchtool",
    help="Analyse and replay Apache Kafka Fetch traffic (KIP-227 fetch sessions, KIP-74, KIP-630).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Order is the order `fetchtool --help` lists them.
COMMANDS = ["analyze", "decode", "sessions", "savings", "simulate", "replay", "broker", "synth"]

for _name in COMMANDS:
    if importlib.util.find_spec(f"fetchtool.commands.{_name}") is not None:
        _module = importlib.import_module(f"fetchtool.commands.{_name}")
        _doc = _module.__doc__ or ""
        # the listing shows the docstring's first paragraph on one line; `fetchtool NAME --help` shows it all
        app.command(_name, help=_doc, short_help=" ".join(_doc.split("\n\n")[0].split()))(_module.main)


@app.callback()
def _root() -> None:
    """Analyse and replay Apache Kafka Fetch traffic."""
    # Everything imported so far (kio's hundreds of schema classes, polars, rich) lives as long as the command:
    # frozen, the collector stops re-walking it each time decoding's millions of row tuples trigger a pass.
    gc.freeze()


if __name__ == "__main__":
    app()
