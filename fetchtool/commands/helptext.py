"""What `fetchtool CMD -h` shows, and the one command-line mistake click lets through.

typer labels every value with its Python type (`--dry-run <bool>`, `capture... <list[Path]>`): noise to a support
engineer. Each parameter gets a readable metavar instead (CAPTURE..., N, FILE), a flag none at all. A command's
prose is reflowed to the terminal's width, and an option's help never loses its end to an ellipsis: a Kafka
setting's name (max.incremental.fetch.session.cache.slots) is what the user came to read.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import os
import re
import sys
import types
from typing import Any

from typer._click.types import FloatParamType, IntParamType
from typer.models import TyperPath as PathType

# Options whose value has a name better than its type says; a command may still set its own metavar.
NAMED = {"--format": "FORMAT", "--output": "FILE", "--out": "DIR", "--client": "CLIENT", "--broker": "BROKER",
         "--port": "PORT", "--master": "URL", "--engine": "ENGINE", "--since": "TIME", "--until": "TIME",
         "--sessions": "MODE", "--expected": "FILE", "--topic": "NAME:N", "--advertised-host": "HOST"}
# Options that take one number in some commands and a comma-separated list of them in others (simulate's
# configurations to compare); the list form is a text option.
NUMBER_LISTS = frozenset({"--cache-slots", "--cache-shards", "--eviction-ms"})

# What a user may type after a flag believing it takes a value (`--dry-run true`).
BOOLEAN_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "1", "0"})


def readable_metavar(param) -> str:
    if getattr(param, "is_flag", False):
        return ""
    if not param.opts or not param.opts[0].startswith("-"):  # an argument
        return param.name.upper() + ("..." if param.nargs != 1 else "")
    long = next((o for o in param.opts if o.startswith("--")), param.opts[0])
    if long in NAMED:
        return NAMED[long]
    if long in NUMBER_LISTS and not isinstance(param.type, (IntParamType, FloatParamType)):
        return "N,..."
    if isinstance(param.type, (IntParamType, FloatParamType)):
        return "N"
    if isinstance(param.type, PathType):
        return "PATH"
    return long.lstrip("-").upper().replace("-", "_")


def set_metavars(params) -> None:
    for param in params:
        if param.metavar is None:
            param.metavar = readable_metavar(param)
        if not param.opts or not param.opts[0].startswith("-"):
            # an argument's type column shows its type's metavar (`<path>`): its name (CAPTURE...) already says
            # what it takes. A copy of the type, so that no other parameter sharing it loses its metavar.
            param.type = copy.copy(param.type)
            param.type.get_metavar = lambda param=None, ctx=None: ""
            # and the usage line reads {CAPTURE}..., as click writes a repeated argument, not {CAPTURE...}
            bare = param.metavar.removesuffix("...")
            usage = (f"{{{bare}}}" if param.required else f"[{bare}]") + ("..." if param.nargs != 1 else "")
            param.get_usage_pieces = lambda ctx=None, usage=usage: [usage]


def flag_given_a_value(params, args: list[str]) -> str | None:
    """`--dry-run true x.pcap`: click takes `true` for a capture. The message for that, or None."""
    flags = {opt for p in params if getattr(p, "is_flag", False) for opt in p.opts}
    for opt, value in zip(args, args[1:]):
        if opt in flags and value.lower() in BOOLEAN_WORDS and not os.path.exists(value):
            return f"{opt} is a flag and takes no value (got {value!r}; give {opt} alone, or leave it out)"
    return None


# A line that starts a list item: it stays a line of its own; the lines after it continue it.
_LIST_ITEM = re.compile(r"[-*] |\d+[.)] ")


def reflowed(doc: str) -> str:
    """A command's docstring as its help: each paragraph's lines joined, so that the help screen wraps it at the
    terminal's width. (typer's rich help keeps every line break of a paragraph: a docstring written 120 columns
    wide breaks each of its lines again at 80.) List items keep their own lines, and so do indented examples
    and a paragraph marked \\b, as click has it."""
    paragraphs = []
    for paragraph in inspect.cleandoc(doc).split("\n\n"):
        out: list[str] = []
        for line in paragraph.split("\n"):
            joins = out and not _LIST_ITEM.match(line) and (not line[:1].isspace() or _LIST_ITEM.match(out[-1]))
            if joins and not paragraph.startswith("\b"):
                out[-1] = f"{out[-1]} {line.strip()}"
            else:
                out.append(line)
        paragraphs.append("\n".join(out))
    return "\n\n".join(paragraphs)


def _folding_table(table_class: type) -> type:
    """rich's Table as typer.rich_utils builds each panel, but whose cells fold a word longer than the column
    instead of cutting it with an ellipsis. (An option's help is a rich Columns of Texts: each Text is told.)"""

    def fold(renderable) -> None:
        for part in getattr(renderable, "renderables", [renderable]):
            if getattr(part, "overflow", "") is None:
                part.overflow = "fold"

    class FoldingTable(table_class):
        folds = True

        def add_row(self, *renderables, **kwargs):
            for renderable in renderables:
                fold(renderable)
            super().add_row(*renderables, **kwargs)

    return FoldingTable


# typer.rich_utils, which draws every help screen, imports two rich modules that fetchtool's help never uses:
# rich.markdown (markdown-it and pygments, for rich_markup_mode="markdown") and rich.traceback (for typer's
# pretty exceptions, turned off in fetchtool.cli): over half the cost of importing it, 35 ms, a quarter of a help
# screen's time.
UNUSED_BY_HELP = {"rich.markdown": "Markdown", "rich.traceback": "Traceback"}


def import_help_renderer() -> None:
    """Import typer.rich_utils with stand-ins for UNUSED_BY_HELP's classes, each importing the real one the first
    time it is used, and have its panels fold long words. Only while typer.rich_utils is imported do the stand-in
    modules sit in sys.modules: any later `import rich.markdown` gets the real module."""
    if "typer.rich_utils" not in sys.modules:
        _import_with_stand_ins()
    rich_utils: Any = sys.modules["typer.rich_utils"]
    if not getattr(rich_utils.Table, "folds", False):
        rich_utils.Table = _folding_table(rich_utils.Table)


def _import_with_stand_ins() -> None:
    stand_ins = {}
    for module, name in UNUSED_BY_HELP.items():
        if module not in sys.modules:
            stand_in = types.ModuleType(module, "imported by typer.rich_utils; fetchtool.commands.helptext")
            setattr(stand_in, name, _Deferred(name, (), {"module": module}))
            sys.modules[module] = stand_ins[module] = stand_in
    try:
        import typer.rich_utils  # noqa: F401
    except ImportError:  # a typer that wants more of them than their class: import it as it is
        for module in stand_ins:
            del sys.modules[module]
        stand_ins.clear()
        import typer.rich_utils  # noqa: F401, F811
    finally:
        for module in stand_ins:
            del sys.modules[module]


class _Deferred(type):
    """A stand-in class that is the real one (of its `module`, by its name) as soon as it is called or asked for
    an attribute. A class rather than a function: typer.rich_utils writes `Markdown | Text` in signatures."""

    def _real(cls) -> type:
        return getattr(importlib.import_module(cls.module), cls.__name__)

    def __call__(cls, *args, **kwargs):
        return cls._real()(*args, **kwargs)

    def __getattr__(cls, name: str):
        return getattr(cls._real(), name)
