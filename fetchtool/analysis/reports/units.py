"""Byte counts as a person reads them (decimal units, as network tools count)."""

from __future__ import annotations


def human(n: float | int | None) -> str:
    if n is None:
        return "-"
    n = float(n)
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{sign}{n:.0f} {unit}" if unit == "B" else f"{sign}{n:.1f} {unit}"
        n /= 1000
    return f"{sign}{n:.1f} TB"


def count(n: int, word: str, plural: str | None = None) -> str:
    """"1 exchange", "2,713 exchanges": the number with thousands separators and the word agreeing with it."""
    return f"{n:,} {word if n == 1 else plural or word + 's'}"


def more_or_less(n: float | int) -> str:
    """A signed byte difference as prose: "738 B more" / "738 B less" (never "-738 B more")."""
    return f"{human(abs(n))} {'less' if n < 0 else 'more'}"
