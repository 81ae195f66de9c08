"""The edge between capture files and the plan: decode, then plan; bad input becomes one-line errors."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from fetchtool.replay.plan import ReplayPlan, build_plan


class CaptureError(Exception):
    """A capture or option that cannot be used; the message is one line for the user."""


def parse_int_list(text: str, option: str, minimum: int = 0) -> list[int]:
    """'1000,2000' -> [1000, 2000]; a clear error for anything else."""
    values = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        try:
            value = int(part)
        except ValueError:
            raise CaptureError(f"{option} expects integers separated by commas, got {text!r}") from None
        if value < minimum:
            raise CaptureError(f"{option} values must be >= {minimum}, got {value}")
        values.append(value)
    if not values:
        raise CaptureError(f"{option} needs at least one value")
    return values


def load_plan(paths: Sequence[Path], ports: Iterable[int] | None = None) -> tuple[ReplayPlan, list[str]]:
    """Decode the capture files and build their replay plan; returns the plan and decode warnings."""
    for p in paths:
        if not Path(p).is_file():
            raise CaptureError(f"{p}: no such file")
    from fetchtool.decoder import decode_capture  # the decoder is another module's edge; import when used

    try:
        result = decode_capture([str(p) for p in paths], ports=list(ports) if ports else None)
    except (OSError, ValueError) as exc:
        raise CaptureError(f"cannot decode {', '.join(map(str, paths))}: {exc}") from None
    exchanges, report = _split(result)
    plan = build_plan(exchanges)
    return plan, _warnings(report)


def _split(result):
    """decode_capture returns (exchanges, report) or an object with .exchanges and .report."""
    if isinstance(result, tuple) and len(result) == 2:
        exchanges, report = result
    else:
        exchanges, report = getattr(result, "exchanges", result), getattr(result, "report", None)
    return list(exchanges), report


def _warnings(report) -> list[str]:
    if report is None:
        return []
    for name in ("warnings", "messages"):
        value = getattr(report, name, None)
        if value:
            return [str(w) for w in (value.items() if isinstance(value, dict) else value)][:20]
    return []
