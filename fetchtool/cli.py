"""The `fetchtool` command: a thin typer shell over the command modules in fetchtool.commands."""

from __future__ import annotations

import gc
import importlib
import importlib.util
import os
import sys
from contextlib import contextmanager

import typer
from typer._click.exceptions import NoArgsIsHelpError, UsageError
from typer.core import TyperCommand, TyperGroup

from fetchtool.commands.helptext import flag_given_a_value, set_metavars
from fetchtool.commands.output import bad_option, usage_error_line
from fetchtool.commands.reading import INTERRUPTED


class _OneLineUsageErrors(TyperGroup):
    """The root group: a command line click cannot parse (a value of the wrong type, an unknown option or command,
    a missing argument) gets the same one `error:` line and exit 2 as a command's own checks, not click's boxed
    usage text. Caught here rather than around app() so that every way in (the console script, `python -m`,
    typer's CliRunner) words it alike; the standalone machinery (exit codes, --help, Ctrl-C) stays click's."""

    def parse_args(self, ctx, args):  # `fetchtool --bogus`
        with _one_line_usage_error():
            return super().parse_args(ctx, args)

    def invoke(self, ctx):  # an unknown command, and everything a command's own parser refuses
        with _one_line_usage_error(), _quiet_endings():
            result = super().invoke(ctx)
            sys.stdout.flush()  # here, where a closed pipe is caught, not at exit where Python reports it
            return result

    def get_help_option(self, ctx):
        return _no_metavar(super().get_help_option(ctx))


class _Command(TyperCommand):
    """A command whose help shows readable metavars, and that refuses a value after a flag."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        set_metavars(self.params)

    def parse_args(self, ctx, args):
        message = flag_given_a_value(self.params, args)
        if message:
            bad_option(message)
        return super().parse_args(ctx, args)

    def get_help_option(self, ctx):
        return _no_metavar(super().get_help_option(ctx))


def _no_metavar(option):
    if option is not None:
        option.metavar = ""  # not `--help <bool>`
    return option


@contextmanager
def _quiet_endings():
    """The two ways a user ends a command early, neither an error worth a traceback: the reader of its output went
    away (`fetchtool analyze X | head -1`: exit 0, as Unix tools do) and Ctrl-C where no command stops by itself
    with a partial report (exit 130, not click's "Aborted!" and 1)."""
    try:
        yield
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush at exit
        raise typer.Exit(0) from None
    except KeyboardInterrupt:
        raise typer.Exit(INTERRUPTED) from None


@contextmanager
def _one_line_usage_error():
    try:
        yield
    except NoArgsIsHelpError:  # bare `fetchtool`: the help is already printed, click exits 2 as before
        raise
    except UsageError as exc:
        bad_option(usage_error_line(exc))


app = typer.Typer(
    cls=_OneLineUsageErrors,
    name="fetchtool",
    help="Analyse and replay Apache Kafka Fetch traffic (KIP-227 fetch sessions, KIP-74, KIP-630).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},  # inherited by every command's context
)

# Order is the order `fetchtool --help` lists them.
COMMANDS = ["analyze", "decode", "sessions", "savings", "simulate", "replay", "broker", "synth"]

for _name in COMMANDS:
    if importlib.util.find_spec(f"fetchtool.commands.{_name}") is not None:
        _module = importlib.import_module(f"fetchtool.commands.{_name}")
        _doc = _module.__doc__ or ""
        # the listing shows the docstring's first paragraph on one line; `fetchtool NAME --help` shows it all
        app.command(_name, cls=_Command, help=_doc,
                    short_help=" ".join(_doc.split("\n\n")[0].split()))(_module.main)


def _print_version(value: bool) -> None:
    if value:
        from fetchtool import CONTRACT_VERSION, tool_version

        typer.echo(f"fetchtool {tool_version()} (report contract {CONTRACT_VERSION})")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", "-V", is_eager=True, callback=_print_version, metavar="",
                                 help="Print fetchtool's version and the report contract's, and exit."),
) -> None:
    """Analyse and replay Apache Kafka Fetch traffic."""
    # Everything imported so far (kio's hundreds of schema classes, polars, rich) lives as long as the command:
    # frozen, the collector stops re-walking it each time decoding's millions of row tuples trigger a pass.
    gc.freeze()


if __name__ == "__main__":
    app()
