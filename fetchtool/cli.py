"""The `fetchtool` command: a thin typer shell over the command modules in fetchtool.commands.

Start-up is part of every command a user times, `fetchtool --help` included. A command module is imported, and
its typer command built, only when that command runs or a help screen lists it; and a command module imports at
its top only what its options need (typer, a few constants): what the command does, it imports when it runs.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager

import typer
from typer._click.core import Command
from typer._click.exceptions import NoArgsIsHelpError, UsageError
from typer.core import TyperCommand, TyperGroup
from typer.main import get_command_from_info
from typer.models import CommandInfo

from fetchtool.commands.helptext import flag_given_a_value, import_help_renderer, reflowed, set_metavars

# Order is the order `fetchtool --help` lists them.
COMMANDS = ["analyze", "decode", "sessions", "savings", "simulate", "replay", "broker", "synth"]


class _OneLineUsageErrors(TyperGroup):
    """The root group: a command line click cannot parse (a value of the wrong type, an unknown option or command,
    a missing argument) gets the same one `error:` line and exit 2 as a command's own checks, not click's boxed
    usage text. Caught here rather than around app() so that every way in (the console script, `python -m`,
    typer's CliRunner) words it alike; the standalone machinery (exit codes, --help, Ctrl-C) stays click's."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.commands = _LazyCommands(list(COMMANDS), self.commands)

    def list_commands(self, ctx):
        return list(self.commands)  # the names only: TyperGroup's would build every command to name them

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

    def format_help(self, ctx, formatter):
        with _drawing_help():
            return super().format_help(ctx, formatter)


class _LazyCommands(MutableMapping[str, Command]):
    """The root group's commands by name, each built the first time it is looked up: `fetchtool decode` imports
    fetchtool.commands.decode and no other command module. The root `--help` lists them all, and so imports
    the eight command modules, but none of what they run."""

    def __init__(self, names: list[str], built: MutableMapping[str, Command]) -> None:
        self._names = names + [name for name in built if name not in names]
        self._built = dict(built)

    def __getitem__(self, name: str) -> Command:
        if name not in self._built:
            if name not in self._names:
                raise KeyError(name)
            self._built[name] = _command(name)
        return self._built[name]

    def __setitem__(self, name: str, command: Command) -> None:
        if name not in self._names:
            self._names.append(name)
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        self._names.remove(name)
        self._built.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._names))

    def __len__(self) -> int:
        return len(self._names)


def _command(name: str) -> Command:
    """fetchtool.commands.NAME's `main` as the typer command `app.command(NAME)` would have registered."""
    module = importlib.import_module(f"fetchtool.commands.{name}")
    doc = module.__doc__ or ""
    # the listing shows the docstring's first paragraph on one line; `fetchtool NAME --help` shows it all
    info = CommandInfo(name, cls=_Command, callback=module.main, help=reflowed(doc),
                       short_help=" ".join(doc.split("\n\n")[0].split()))
    return get_command_from_info(info, pretty_exceptions_short=app.pretty_exceptions_short,
                                 rich_markup_mode=app.rich_markup_mode)


class _Command(TyperCommand):
    """A command whose help shows readable metavars, and that refuses a value after a flag."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        set_metavars(self.params)

    def parse_args(self, ctx, args):
        message = flag_given_a_value(self.params, args)
        if message:
            from fetchtool.commands.output import bad_option

            bad_option(message)
        return super().parse_args(ctx, args)

    def get_help_option(self, ctx):
        return _no_metavar(super().get_help_option(ctx))

    def format_help(self, ctx, formatter):
        with _drawing_help():
            return super().format_help(ctx, formatter)


_help_drawn = False


@contextmanager
def _drawing_help():
    """A help screen ends as a command does when its output cannot be written: a reader that went away
    (`fetchtool --help | head -1`) is exit 0, a full disk one `error:` line and exit 1, never a traceback."""
    global _help_drawn
    _help_drawn = True
    import_help_renderer()
    try:
        yield
    except SystemExit as exc:
        # rich's own answer to a closed pipe (Console.on_broken_pipe: stdout to /dev/null, exit 1) is the only
        # way drawing help exits
        raise SystemExit(0 if exc.code == 1 else exc.code) from None
    except OSError as exc:
        from fetchtool.commands.output import fail

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush at exit
        fail(f"cannot write the help: {exc.strerror or exc}")


def help_drawn() -> bool:
    """Whether this process drew a help screen (fetchtool.__main__ then ends it without the teardown)."""
    return _help_drawn


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
        from fetchtool.commands.reading import INTERRUPTED

        raise typer.Exit(INTERRUPTED) from None


@contextmanager
def _one_line_usage_error():
    try:
        yield
    except NoArgsIsHelpError:  # bare `fetchtool`: the help is already printed, click exits 2 as before
        raise
    except UsageError as exc:
        from fetchtool.commands.output import bad_option, usage_error_line

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
    # What the command line machinery built lives as long as the command: frozen, the collector leaves it
    # alone (commands.reading freezes again once a command's own imports are done and the capture is read).
    gc.freeze()
    gc.enable()  # off during start-up (fetchtool.__main__)


if __name__ == "__main__":  # `python -m fetchtool.cli`: as `python -m fetchtool`
    from fetchtool.__main__ import main

    main()
