"""Capture times as a support engineer reads them next to Wireshark."""

from __future__ import annotations

from datetime import datetime, timezone


def clock(ts: float) -> str:
    """An epoch time as HH:MM:SS.mmm UTC."""
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%H:%M:%S.%f")[:-3] + " UTC"
