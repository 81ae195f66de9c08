"""The edge between capture files and the plan: decode, then plan; bad input becomes one-line errors."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from fetchtool.replay.plan import ReplayPlan, build_plan


class CaptureError(Exception):
    """A capture that cannot be used; the message is one line for the user."""


class OptionError(ValueError):
    """An option value that cannot be used (the command line is wrong); the message is one line for the user."""


def parse_int_list(text: str, option: str, minimum: int = 0) -> list[int]:
    """'1000,2000' -> [1000, 2000]; a clear error for anything else, an empty item too ('1,,2', '1,'): a
    configuration silently left out of a comparison is worse than asking again."""
    text = str(text)
    if not text.strip():
        raise OptionError(f"{option} needs at least one value")
    values = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            raise OptionError(f"{option}: empty value in {text!r}")
        try:
            value = int(part)
        except ValueError:
            raise OptionError(f"{option} expects integers separated by commas, got {text!r}") from None
        if value < minimum:
            raise OptionError(f"{option} values must be >= {minimum}, got {value}")
        values.append(value)
    return values


def load_plan(paths: Sequence[Path], ports: Iterable[int] | None = None) -> tuple[ReplayPlan, list[str]]:
    """Decode the capture files and build their replay plan; returns the plan and the decode's warning lines.

    Missing, unreadable files and directories are the decoder's to judge, as for analyze and decode: each is a
    counted warning while another file can be read, one CaptureError line when none can."""
    from fetchtool.capture.reader import CaptureError as Unreadable  # the decoder is another module's edge
    from fetchtool.decoder import decode_capture

    run = decode_capture([str(p) for p in paths], ports=list(ports) if ports else None)
    try:
        plan = build_plan(run)
    except Unreadable as exc:  # nothing in the files could be read
        raise CaptureError(str(exc)) from None
    return plan, run.report.warning_lines()[:20]
