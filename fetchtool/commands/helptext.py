"""What `fetchtool CMD -h` shows for each parameter, and the one command-line mistake click lets through.

typer labels every value with its Python type (`--dry-run <bool>`, `capture... <list[Path]>`): noise to a support
engineer. Each parameter gets a readable metavar instead (CAPTURE..., N, FILE), a flag none at all.
"""

from __future__ import annotations

import copy
import importlib
import os
import sys
import types

from typer._click.types import FloatParamType, IntParamType
from typer.models import TyperPath as PathType

# Options whose value has a name better than its type says; a command may still set its own metavar.
NAMED = {"--format": "FORMAT", "--output": "FILE", "--out": "DIR", "--client": "CLIENT", "--broker": "BROKER",
         "--port": "PORT", "--master": "URL", "--engine": "ENGINE", "--since": "TIME", "--until": "TIME",
         "--sessions": "MODE", "--expected": "FILE", "--topic": "NAME:PARTITIONS"}

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


# typer.rich_utils, which draws every help screen, imports two rich modules that fetchtool's help never uses:
# rich.markdown (markdown-it and pygments, for rich_markup_mode="markdown") and rich.traceback (for typer's
# pretty exceptions, turned off in fetchtool.cli): over half the cost of importing it, 35 ms, a quarter of a help
# screen's time.
UNUSED_BY_HELP = {"rich.markdown": "Markdown", "rich.traceback": "Traceback"}


def import_help_renderer() -> None:
    """Import typer.rich_utils with stand-ins for UNUSED_BY_HELP's classes, each importing the real one the first
    time it is used. Only while typer.rich_utils is imported do the stand-in modules sit in sys.modules: any later
    `import rich.markdown` gets the real module."""
    if "typer.rich_utils" in sys.modules:
        return
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
