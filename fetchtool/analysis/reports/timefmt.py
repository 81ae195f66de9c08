"""Capture times as a support engineer reads them next to Wireshark.

A capture can carry any timestamp (a clock set wrong, nanoseconds read as microseconds, a fuzzed file): one past
what a calendar date can hold (year 9999) is shown as epoch seconds, never raised.
"""

from __future__ import annotations

from datetime import datetime, timezone


def utc(ts: float, fmt: str, digits: int = 3) -> str:
    """``ts`` (epoch seconds) formatted as a UTC date with ``fmt``, its fraction cut to ``digits``; out of a
    calendar's range, the seconds themselves."""
    try:
        text = datetime.fromtimestamp(ts, timezone.utc).strftime(fmt)
    except (ValueError, OverflowError, OSError):
        return f"{ts:.{digits}f} s after 1970 (beyond any calendar date)"
    return text[: len(text) - (6 - digits)] if fmt.endswith("%f") else text


def clock(ts: float) -> str:
    """An epoch time as HH:MM:SS.mmm UTC."""
    return utc(ts, "%H:%M:%S.%f") + " UTC"


def when(ts: float | None) -> str:
    """An epoch time as YYYY-MM-DD HH:MM:SS.mmm (UTC), "-" when unknown."""
    return "-" if ts is None else utc(ts, "%Y-%m-%d %H:%M:%S.%f")


def iso(ts: float) -> str:
    """An epoch time as ISO 8601 UTC to the millisecond: 2026-11-24T08:33:12.345Z."""
    text = utc(ts, "%Y-%m-%dT%H:%M:%S.%f")
    return text + "Z" if text[:1].isdigit() and "T" in text else text
