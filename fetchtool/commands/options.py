"""Options several commands share, worded once."""

from __future__ import annotations

import typer


def since_option():
    return typer.Option(None, "--since", help="only exchanges requested at or after this time: ISO 8601 UTC "
                                              "(2026-11-24T08:33:12Z), epoch seconds, or +30s / +2m from the "
                                              "capture's first packet")


def until_option():
    return typer.Option(None, "--until", help="only exchanges requested before this time (same forms as --since)")


def width_option():
    return typer.Option(None, "--width", help="report width in columns (default: the terminal's; when piped, "
                                              "$COLUMNS, else 200)")
