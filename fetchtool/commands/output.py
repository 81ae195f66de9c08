"""Where a command's report goes, and how it fails: one line on stderr, never a traceback.

Every way out of a command is here, and each one escapes what a capture or a peer could put in its text
(fetchtool.printable): the report consoles (tables on stdout, messages and progress on stderr), `emit` (markdown,
HTML, JSON and --output files), `warn` and `fail`.
"""

from __future__ import annotations

import ast
import logging
import math
import os
import re
from pathlib import Path
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NoReturn

import rich.text
import typer
from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

from fetchtool.printable import last_resort_handler, one_line, printable

if TYPE_CHECKING:
    from fetchtool.replay.plan import ReplayPlan

# Exit codes, as click's own: 2 for a bad option value (the command line is wrong), 1 for input that cannot be
# used (no such file, nothing could be read, a broker that cannot be reached).
USAGE = 2

# Tables written to a file or a pipe get this width instead of rich's default 80 columns, which would cut
# client ids and session ids short. Tables never stretch to it: they stay as wide as their content.
FILE_WIDTH = 200


def fail(message: str, code: int = 1) -> NoReturn:
    # typer.echo, not rich: a message must stay one line (rich wraps at the terminal width) and a '[' in a file
    # name must not be taken for markup. An exception's text is cut to its first line here, once for all callers.
    # Cut at a newline only (splitlines() would also cut at a \x1c or U+2028 inside a client id); the rest escaped.
    first = message.split("\n", 1)[0].rstrip("\r")
    typer.echo(f"error: {one_line(first)}", err=True)
    raise typer.Exit(code)


def bad_option(message: str) -> NoReturn:
    fail(message, USAGE)


# The value click's types refuse, quoted as repr() writes it, and what they wanted
_REFUSED = re.compile(r"^(?P<value>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\") is not (?:a valid (?P<kind>[\w ]+)|one of )")
_NUMBER_WORDS = {"int": "integer", "float": "number", "integer": "integer"}


def usage_error_line(exc) -> str:
    """What click refused on the command line (a click UsageError), worded like the commands' own checks:
    "--cache-slots should be a valid integer, got 'abc'", "unknown --format 'xx' (choose from jsonl, table)",
    "no such option: --bogus", "missing argument capture"."""
    from typer._click.exceptions import BadParameter, MissingParameter

    param = getattr(exc, "param", None)
    name = (param.opts or [param.name])[0] if param is not None else None
    if isinstance(exc, MissingParameter) and param is not None and name:
        return f"missing {param.param_type_name} {name}"
    refused = _REFUSED.match(exc.message) if isinstance(exc, BadParameter) else None
    if refused and param is not None and name:  # click's "'abc' is not a valid int." / "'xml' is not one of 'jsonl', 'table'."
        value, kind = ast.literal_eval(refused["value"]), refused["kind"]
        choices = getattr(param.type, "choices", None)
        if choices:
            return choice_error(value, name, [getattr(c, "value", c) for c in choices])
        if kind in _NUMBER_WORDS:
            return f"{name} should be a valid {_NUMBER_WORDS[kind]}, got {value!r}"
    text = " ".join(exc.format_message().split()).rstrip(".")
    text = re.sub(r"'(-{1,2}[\w-]+)'", r"\1", text)  # "option '--port' requires an argument": no quotes on options
    text = text.replace(". Did you mean", "; did you mean").replace("(Possible options:", "(possible options:")
    return text[:1].lower() + text[1:] if text[:2].istitle() else text


def choice_error(value: str, option: str, choices) -> str:
    return f"unknown {option} {value!r} (choose from {', '.join(choices)})"


def check_choice(value: str, option: str, choices) -> None:
    if value not in choices:
        bad_option(choice_error(value, option, choices))


def check_port(port: int | None, option: str, allow_zero: bool = False) -> None:
    """A TCP port option: 1-65535 (0 too where it means "pick a free port")."""
    if port is not None and not (0 if allow_zero else 1) <= port <= 65535:
        bad_option(f"{option} must be {'0' if allow_zero else '1'}-65535, got {port}")


def check_ports(ports: list[int] | None, option: str = "--port") -> None:
    for port in ports or ():
        check_port(port, option)


def check_positive(value: float | None, option: str, minimum: float = 0, strict: bool = True) -> None:
    """A number option that must be finite and > minimum (>= minimum when not strict)."""
    if value is None:
        return
    if not math.isfinite(value) or (value <= minimum if strict else value < minimum):
        bad_option(f"{option} must be a number {'>' if strict else '>='} {minimum:g}, got {value}")


def int_list_option(text: str, option: str, minimum: int = 0) -> list[int]:
    """'1000,2000' -> [1000, 2000]; a usage error for anything else, an empty item too ('1,,2', '1,'): a
    configuration silently left out of a comparison is worse than asking again."""
    text = str(text)
    if not text.strip():
        bad_option(f"{option} needs at least one value")
    values = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            bad_option(f"{option}: empty value in {text!r}")
        try:
            value = int(part)
        except ValueError:
            bad_option(f"{option} expects integers separated by commas, got {text!r}")
        if value < minimum:
            bad_option(f"{option} values must be >= {minimum}, got {value}")
        values.append(value)
    return values


def _escaped_for_rich(text: str, _translate_table: dict[int, None] | None = None) -> str:
    # rich.control.strip_control_codes' signature; newlines stay: rich splits a Text into lines at them
    return printable(text)


# rich's own sanitizer, called on every string that becomes a Text (Text(), append, markup, console.print of a
# str), silently drops BEL, BS, VT, FF and CR and lets ESC and the C1 controls through. Replaced by the escaping
# one, the text is escaped the moment it enters rich, before any layout: tables measure the escaped id they
# will show (`\x1b]0;pwned\x07` is 15 columns; the raw string measured 7), and nothing is dropped unseen.
# rich has no public hook for this; SafeConsole below is the net should a future rich stop calling it.
rich.text.strip_control_codes = _escaped_for_rich


# Warnings logged where no handler was set up (the in-process broker of `replay`) reach stderr escaped too.
logging.lastResort = last_resort_handler()


class SafeConsole(Console):
    """A rich Console that never writes a control character it did not mean: the text of every segment is
    escaped (fetchtool.printable) as it is rendered, while rich's own control segments (cursor moves of a
    progress bar) and its styles (colour codes, added when the segments are written) go through as they are.

    Markup, too, is only what a command writes itself: a string it prints directly may style itself
    ("[bold]Plan[/bold]: ..."), but a string inside a table, a panel or any other renderable (a client id in a
    cell) is text, `[bold]x[/bold]` shown as it is."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("markup", False)
        super().__init__(*args, **kwargs)

    def print(self, *objects: Any, markup: bool | None = None, emoji: bool | None = None,
              highlight: bool | None = None, **kwargs: Any) -> None:
        # what Console.print does with a str argument, but with markup on unless the caller turned it off
        objects = tuple(self.render_str(o, emoji=emoji, markup=markup is not False, highlight=highlight)
                        if isinstance(o, str) else o for o in objects)
        super().print(*objects, markup=markup, emoji=emoji, highlight=highlight, **kwargs)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control:
                yield segment
            else:
                text = printable(segment.text)
                yield segment if text is segment.text else Segment(text, segment.style)


def error_console(**kwargs) -> Console:
    """The console for stderr (messages, the decode report's lines, progress bars), escaped as the reports."""
    return SafeConsole(stderr=True, **kwargs)


class _ReportConsole(SafeConsole):
    def on_broken_pipe(self) -> None:
        # rich's own answer to a closed pipe is exit 1; fetchtool.cli ends every command the same quiet way (0)
        raise BrokenPipeError


def report_console(file=None, width: int | None = None) -> Console:
    """The console every report table is printed on, its width by one rule: --width N if given; else the
    terminal's width on a terminal; else $COLUMNS (a user's `COLUMNS=80 fetchtool ... | less`); else
    FILE_WIDTH."""
    check_positive(width, "--width", 19, strict=False)  # narrower, rich cannot lay a table out at all
    console = _ReportConsole(file=file, width=width)
    if width is None and not console.is_terminal:
        columns = os.environ.get("COLUMNS", "")
        console.width = int(columns) if columns.isdigit() and int(columns) > 0 else FILE_WIDTH
    return console


def warn(message: str) -> None:
    typer.echo(f"warning: {one_line(message)}", err=True)


def warn_if_nothing_matched(matched: bool, client: str | None, broker: str | None) -> None:
    """An empty report after --client/--broker is otherwise indistinguishable from a quiet capture."""
    if not matched and (client is not None or broker is not None):
        named = " and ".join(f"{opt} {value!r}" for opt, value in (("--client", client), ("--broker", broker))
                             if value is not None)
        warn(f"no Fetch exchange in the capture matched {named}")


def warn_empty_shards(cache_slots: int, cache_shards: int) -> None:
    """Kafka divides the slots among the shards by integer division: fewer slots than shards is legal but
    creates no session at all, which is rarely what was meant (the capture may come from a broker before 3.8,
    with one shard)."""
    if 0 < cache_slots < cache_shards:
        warn(f"--cache-slots {cache_slots} over {cache_shards} shards leaves 0 slots per shard: no incremental "
             "fetch session will be created (as in Kafka 3.8+; --cache-shards 1 models a broker before 3.8)")


def emit(text: str | Iterable[str], output: Path | None) -> None:
    """The report to stdout, or to --output FILE, with every character from a capture that is not safe to show
    escaped (fetchtool.printable): markdown and HTML show `\\x1b` as text; a JSON document stays valid and
    lossless (the encoder already escapes C0; DEL, C1 and the rest become its own \\uNNNN escapes). ``text`` may
    come in pieces, each written as it comes (a report too big to hold whole: replay.jsonout.json_text);
    printable escapes character by character, so the pieces read as the whole would."""
    pieces = (text,) if isinstance(text, str) else text
    if output is None:
        for piece in pieces:
            typer.echo(printable(piece), nl=False)
        return
    try:
        with output.open("w") as out:
            for piece in pieces:
                out.write(printable(piece))
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror or exc}")


def plan_or_fail(reading, what: str, with_reads: bool | str = True):
    """The replay plan of the capture for simulate and replay (a commands.reading.Reading); decode warnings go to
    stderr, one line each. Fails with one line when nothing can be read, and as every command does when the
    capture holds no Fetch exchange to `what` (a verb). The plan's first pass spills the exchanges' partitions
    to a temporary file, not memory (replay.plan.build_plan). ``with_reads=False``: a plan without the steps'
    reads, for --dry-run; ``LATER``: reads made while simulating."""
    import tempfile

    from fetchtool.decoder import CaptureError
    from fetchtool.replay.plan import build_plan  # only the commands that plan pay for it

    plan: ReplayPlan | None = None
    spill = None
    try:
        spill = tempfile.TemporaryFile(prefix="fetchtool-plan-")
        plan = build_plan(reading.items(), spill, with_reads)
    except CaptureError as exc:
        fail(str(exc))
    except OSError as exc:  # the spill: about 10 MB per 100 MB of capture, in $TMPDIR
        fail(f"cannot write the plan's temporary file in {tempfile.gettempdir()}: {exc.strerror or exc} "
             "(set TMPDIR to a directory with room)")
    finally:
        if spill is not None and (plan is None or plan.later_reads is None):
            spill.close()   # (a plan that makes its reads later keeps it open: with_reads=LATER)
    assert plan is not None   # (fail raised otherwise)
    for w in reading.report.warning_lines()[:20]:
        warn(w)
    reading.require_traffic(reading.exchanges if plan.streams else 0, to_run=True)
    return plan
