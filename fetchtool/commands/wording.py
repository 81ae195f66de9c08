"""Counts as the commands print them: thousands separators always, and the noun agreeing with the number."""

from __future__ import annotations


def plural(n: int, word: str) -> str:
    if n == 1:
        return word
    if word.endswith("y") and word[-2:-1] not in "aeiou":
        return word[:-1] + "ies"
    return word + ("es" if word.endswith(("s", "sh", "ch", "x")) else "s")


def count(n: int, word: str) -> str:
    """count(2713, "exchange") -> "2,713 exchanges"; count(1, "exchange") -> "1 exchange"."""
    return f"{n:,} {plural(n, word)}"
