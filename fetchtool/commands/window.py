"""--since / --until: the exchanges a command reads, by request time.

A time is an ISO 8601 timestamp (UTC unless it names its offset: `2026-11-24T08:33:12Z`, `2026-11-24 08:33:12.5`),
epoch seconds (`1763973192.5`), or an offset from the capture's first packet (`+30s`, `+2m`, `+1h`, `+1.5`).
The window is half-open, since <= request time < until, so that adjacent windows never count an exchange twice.
A response whose request is not in the capture (no request time) is kept by its own time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone

from fetchtool.commands.output import bad_option

_RELATIVE = re.compile(r"^\+(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h)?$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


@dataclass(frozen=True)
class TimeWindow:
    since: float | None = None
    until: float | None = None

    def __bool__(self) -> bool:
        return self.since is not None or self.until is not None

    def keeps(self, item) -> bool:
        ts = item.ts
        return ts is not None and (self.since is None or ts >= self.since) and (self.until is None or ts < self.until)

    def describe(self) -> str:
        from fetchtool.analysis.reports.timefmt import iso

        if self.since is not None and self.until is not None:
            return f"between {iso(self.since)} and {iso(self.until)}"
        if self.since is not None:
            return f"since {iso(self.since)}"
        return "at any time" if self.until is None else f"before {iso(self.until)}"




def parse_time(text: str, option: str) -> float | tuple[str, float]:
    """Epoch seconds, or ("+", seconds) for an offset from the capture's start (resolved once it is known)."""
    text = text.strip()
    m = _RELATIVE.match(text)
    if m:
        return ("+", float(m.group(1)) * _UNIT_S[m.group(2)])
    try:
        return float(text)
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in "zZ" and text else text)
    except ValueError:
        bad_option(f"{option} wants an ISO 8601 UTC time (2026-11-24T08:33:12Z), epoch seconds or an offset "
                   f"from the capture's start (+30s, +2m), got {text!r}")
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def time_window(since: str | None, until: str | None, captures) -> TimeWindow:
    """The window the options ask for; offsets resolved against the first packet of the capture files."""
    ends = [None if t is None else parse_time(t, opt) for t, opt in ((since, "--since"), (until, "--until"))]
    start = 0.0  # read only when an end is an offset
    if any(isinstance(e, tuple) for e in ends):
        first = capture_start(captures)
        if first is None:
            bad_option("an offset such as +30s needs a capture file that can be read to count from")
        start = first
    since_at, until_at = (start + e[1] if isinstance(e, tuple) else e for e in ends)
    window = TimeWindow(since_at, until_at)
    if window.since is not None and window.until is not None and window.until <= window.since:
        from fetchtool.analysis.reports.timefmt import iso

        bad_option(f"--until ({iso(window.until)}) must be later than --since ({iso(window.since)})")
    return window


def capture_start(captures) -> float | None:
    """The earliest first-packet time of the capture files that can be read here (None: none can)."""
    from collections import Counter

    from fetchtool.capture.reader import CaptureError, read_records

    firsts = []
    for path in captures:
        try:
            for _frame, ts, *_rest in read_records(str(path), Counter()):
                firsts.append(ts)
                break
        except (CaptureError, OSError):
            continue
    return min(firsts, default=None)
