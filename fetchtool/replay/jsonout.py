"""A JSON report written piece by piece, byte for byte what ``json.dumps(doc, indent=2)`` gives.

simulate's JSON lists every client stream of every configuration: on a capture of 100,000 connections the whole
document as Python dicts, and then as json's list of small strings, took about 600 MB for a 79 MB report. Here
the rows of such a list are made when written (`Rows`), encoded one at a time and let go, and the text comes
in pieces (`json_text`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any


class Rows:
    """A JSON array whose items are made when read: ``make(n)`` for n in range(count). Reads like a sequence
    (the markdown report indexes it), so a report can hold one row at a time."""

    __slots__ = ("count", "make")

    def __init__(self, count: int, make: Callable[[int], Any]) -> None:
        self.count = count
        self.make = make

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, n: int) -> Any:
        if not -self.count <= n < self.count:
            raise IndexError(n)
        return self.make(n % self.count)

    def __iter__(self) -> Iterator[Any]:
        return map(self.make, range(self.count))

    def __eq__(self, other: object) -> bool:
        """Equal to the rows, or list of rows, with the same items in the same order (made again to compare)."""
        if not isinstance(other, (Rows, list)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]


_INDENTED = json.JSONEncoder(indent=2)


def chunks(doc: Any, level: int = 0) -> Iterator[str]:
    """The text of ``json.dumps(doc, indent=2)``, in pieces. Dicts and lists are walked and each item of a Rows
    is encoded whole, indented to its place (a JSON string holds no raw newline, so the encoder's line breaks
    are the only ones to indent); every other value is what json writes for it at any indent."""
    if isinstance(doc, dict):
        yield from _container(doc.items(), len(doc), "{", "}", level, keyed=True)
    elif isinstance(doc, (list, tuple)):  # json writes a tuple as a list
        yield from _container(doc, len(doc), "[", "]", level, keyed=False)
    elif isinstance(doc, Rows):
        pad = "\n" + "  " * (level + 1)
        encode = _INDENTED.encode
        yield from _container((encode(row).replace("\n", pad) for row in doc), len(doc), "[", "]", level,
                              keyed=False, encoded=True)
    else:
        yield json.dumps(doc)


def _container(items, size: int, opening: str, closing: str, level: int, keyed: bool,
               encoded: bool = False) -> Iterator[str]:
    if not size:
        yield opening + closing
        return
    inner = "\n" + "  " * (level + 1)
    yield opening
    first = True
    for item in items:
        head = inner if first else "," + inner
        first = False
        if keyed:
            key, value = item
            if not isinstance(key, str):
                raise TypeError(f"a report key must be a string here, not {key!r}")
            head += json.dumps(key) + ": "
        else:
            value = item
        if encoded:
            yield head + value
        elif isinstance(value, (dict, list, tuple, Rows)):
            yield head
            yield from chunks(value, level + 1)
        else:
            yield head + json.dumps(value)
    yield "\n" + "  " * level + closing


def json_text(doc: Any, size: int = 1 << 16) -> Iterator[str]:
    """``json.dumps(doc, indent=2) + "\\n"`` in pieces of about ``size`` characters."""
    buf: list[str] = []
    held = 0
    for piece in chunks(doc):
        buf.append(piece)
        held += len(piece)
        if held >= size:
            yield "".join(buf)
            buf.clear()
            held = 0
    buf.append("\n")
    yield "".join(buf)
