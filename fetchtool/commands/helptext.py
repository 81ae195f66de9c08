"""What `fetchtool CMD -h` shows for each parameter, and the one command-line mistake click lets through.

typer labels every value with its Python type (`--dry-run <bool>`, `capture... <list[Path]>`): noise to a support
engineer. Each parameter gets a readable metavar instead (CAPTURE..., N, FILE), a flag none at all.
"""

from __future__ import annotations

import os
import typing
from pathlib import Path

# Options whose value has a name better than its type says; a command may still set its own metavar.
NAMED = {"--format": "FORMAT", "--output": "FILE", "--out": "DIR", "--client": "CLIENT", "--broker": "BROKER",
         "--port": "PORT", "--master": "URL", "--engine": "ENGINE", "--since": "TIME", "--until": "TIME",
         "--sessions": "MODE", "--expected": "FILE", "--topic": "NAME:PARTITIONS"}

# What a user may type after a flag believing it takes a value (`--dry-run true`).
BOOLEAN_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "1", "0"})


def readable_metavar(param) -> str:
    if getattr(param, "is_flag", False):
        return ""
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    kind = typing.get_args(annotation)[0] if typing.get_args(annotation) else annotation
    if not param.opts or not param.opts[0].startswith("-"):  # an argument
        return param.name.upper() + ("..." if param.nargs != 1 else "")
    long = next((o for o in param.opts if o.startswith("--")), param.opts[0])
    if long in NAMED:
        return NAMED[long]
    if kind in (int, float):
        return "N"
    if kind is Path:
        return "PATH"
    return long.lstrip("-").upper().replace("-", "_")


def set_metavars(params) -> None:
    for param in params:
        if param.metavar is None:
            param.metavar = readable_metavar(param)
        if not param.opts or not param.opts[0].startswith("-"):
            # an argument's type column ignores its metavar: its name (CAPTURE...) already says what it takes
            param.display_type_rich = lambda ctx=None: None
            # and the usage line adds its own "...": {CAPTURE}..., not {CAPTURE...}...
            bare = param.metavar.removesuffix("...")
            usage = (f"{{{bare}}}" if param.required else f"[{bare}]") + ("..." if param.nargs != 1 else "")
            param._usage_display_name = lambda usage=usage: usage


def flag_given_a_value(params, args: list[str]) -> str | None:
    """`--dry-run true x.pcap`: click takes `true` for a capture. The message for that, or None."""
    flags = {opt for p in params if getattr(p, "is_flag", False) for opt in p.opts}
    for opt, value in zip(args, args[1:]):
        if opt in flags and value.lower() in BOOLEAN_WORDS and not os.path.exists(value):
            return f"{opt} is a flag and takes no value (got {value!r}; give {opt} alone, or leave it out)"
    return None
