"""Tables that never cut an id short: a table when it fits the width the console gives, else one card per row.

The rule: a table is drawn only if every column that holds an id (client id, ip:port, session id, topic, count)
fits at its full width, and each prose column (reasons, request kinds) gets at least PROSE_MIN columns to wrap
in. Otherwise each row becomes a card: its label (the first column) on a line of its own, then `key: value`
lines, wrapped at spaces, so an id is only ever moved to the next line, never cut.

The choice is made at render time (`__rich_console__`), from the width rich hands the renderable, so callers
need not know the width: `Console(width=80)`, a pipe, a panel's inside all work.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import islice

from dataclasses import dataclass

from rich import box
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.padding import Padding
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

PROSE_MIN = 24  # narrowest a prose column may wrap to before cards read better


@dataclass(frozen=True)
class Col:
    name: str
    right: bool = False  # numbers
    prose: bool = False  # free text that may wrap inside its cell; every other column is kept whole


Cell = str | tuple[str, ...]  # a tuple: several values, one a line in a table, ", " in a card


def cell_len(text: str) -> int:
    """The width rich gives `text` once it is a Text: what a report console shows (a control character from a
    capture escaped to `\\x1b`, by fetchtool.commands.output), not the raw string's."""
    if text.isascii() and text.isprintable():
        return len(text)  # one cell a character: no Text to make (decode's table measures millions of cells)
    return Text(text).cell_len


def _lines(cell: Cell) -> list[str]:
    return list(cell) if isinstance(cell, tuple) else str(cell).split("\n")


def _flat(cell: Cell) -> str:
    return ", ".join(cell) if isinstance(cell, tuple) else str(cell).replace("\n", ", ")


class Fit:
    """A titled list of rows, drawn as a table or as cards, whichever the width allows (module docstring)."""

    def __init__(self, title: str, cols: tuple[Col, ...], rows: Sequence[Sequence[Cell]], caption: str | None = None,
                 empty: str | None = None, label: str = "{}") -> None:
        self.title, self.cols, self.rows, self.caption, self.empty = title, cols, rows, caption, empty
        self.label = label  # a card's heading, from the first column ("session {}" -> "session 123")

    def natural(self) -> list[int]:
        """Each column's width with nothing wrapped."""
        return [max([cell_len(c.name)] + [cell_len(line) for r in self.rows for line in _lines(r[i])])
                for i, c in enumerate(self.cols)]

    def table_width(self) -> int:
        """The narrowest a table can be with every id whole: borders, padding, ids in full, prose at PROSE_MIN."""
        widths = [min(w, PROSE_MIN) if c.prose else w for c, w in zip(self.cols, self.natural())]
        return sum(widths) + 3 * len(widths) + 1

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self.rows:
            if self.empty:
                yield Text(self.empty)
            return
        if self.table_width() <= options.max_width:
            yield self.table()
        else:
            yield from self.cards()

    def table(self) -> Table:
        t = Table(title=self.title, caption=self.caption, caption_justify="left")  # a wrapped note reads from its edge
        for c, w in zip(self.cols, self.natural()):
            if c.prose:
                t.add_column(c.name, overflow="fold", min_width=min(w, PROSE_MIN))
            else:  # min_width: rich would otherwise squeeze and ellipsize it
                t.add_column(c.name, justify="right" if c.right else "left", no_wrap=True, min_width=w)
        for r in self.rows:
            t.add_row(*("\n".join(_lines(x)) for x in r))
        return t

    def cards(self):
        yield Text(self.title, style="bold italic")
        for r in self.rows:
            yield Text(self.label.format(_flat(r[0])), style="bold")
            for c, x in zip(self.cols[1:], r[1:]):
                yield Padding(Text(f"{c.name}: {_flat(x)}"), (0, 0, 0, 2), expand=False)
        if self.caption:
            yield Text(self.caption, style="dim")
        yield Text("")


class Steps:
    """Many short rows in time order (a session's epochs, decoded exchanges): a table when every column fits
    whole, else the first column (the time) and the other fields after it, two spaces apart, wrapped at spaces
    beside it, so a long value (FETCH_SESSION_ID_NOT_FOUND, a session id) moves to the next line whole and a
    wrapped row stays under its own time. A card per row would take a screen for a dozen rows.

    `rows` is read twice (the widths, then the rows): a list, or anything iterable again, such as rows kept on
    disk. parts() gives the output in pieces of CHUNK_ROWS rows, each laid out with the widths of all of them,
    which together read as one table; printed one by one, rich holds one piece at a time (150,000 exchanges as
    one rich Table took 1.6 GB and minutes). A table's rows are plain lines, padded as rich pads them."""

    CHUNK_ROWS = 1000

    def __init__(self, head: tuple[str, ...], rows: Iterable[tuple[str, ...]], title: str | None = None) -> None:
        self.head, self.rows, self.title = head, rows, title

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self.parts(options.max_width)

    def parts(self, max_width: int) -> Iterator[RenderableType]:
        widths = [cell_len(h) for h in self.head]
        head = "  ".join(self.head[1:])
        fields = cell_len(head)  # the grid's second column: the fields, two spaces apart
        gaps = 2 * (len(self.head) - 2)
        for r in self.rows:
            lens = [cell_len(cell) for cell in r]
            widths = list(map(max, widths, lens))
            fields = max(fields, sum(lens) - lens[0] + gaps)
        if sum(widths) + 3 * (len(widths) - 1) <= max_width:  # else rich squeezes the last columns away
            # SIMPLE_HEAD, no edges: the title and the header from rich, then each row's cells padded to their
            # column and 3 spaces apart (a cell's padding, the box's blank rule, the next cell's padding)
            t = Table(title=self.title, box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
            for h, w in zip(self.head, widths):
                t.add_column(h, no_wrap=True, min_width=w)
            yield t
            for chunk in _chunks(self.rows, self.CHUNK_ROWS):
                yield _LaidOut("   ".join(_pad(c, w) for c, w in zip(r, widths)) for r in chunk)
            return
        if self.title:
            yield Text(self.title, style="bold italic")
        # the fields' column as rich sizes it for all the rows: their longest line, or what the width leaves
        fields = max(1, min(fields, max_width - widths[0] - GRID_PAD))

        def grid(*rows) -> Table:
            g = Table.grid(padding=(0, GRID_PAD))
            g.add_column(no_wrap=True, min_width=widths[0])
            g.add_column(width=fields)
            for r in rows:
                g.add_row(*r)
            return g

        yield grid((Text(self.head[0], style="bold"), Text(head, style="bold")))
        gap = " " * GRID_PAD
        for chunk in _chunks(self.rows, self.CHUNK_ROWS):
            lines: list[str] = []
            for r in chunk:
                joined = "  ".join(r[1:])
                if cell_len(joined) <= fields:  # one line, as rich pads it
                    lines.append(_pad(r[0], widths[0]) + gap + _pad(joined, fields))
                    continue
                if lines:
                    yield _LaidOut(lines)
                    lines = []
                yield grid((r[0], joined))  # wrapped by rich, at spaces
            if lines:
                yield _LaidOut(lines)


class _LaidOut:
    """Lines already laid out to fit, written as they are (a Text would be joined, measured and wrapped again)."""

    def __init__(self, lines: Iterable[str]) -> None:
        self.lines = lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        new_line = Segment.line()
        for line in self.lines:
            yield Segment(line)
            yield new_line


def _pad(cell: str, width: int) -> str:
    return cell + " " * (width - cell_len(cell))


GRID_PAD = 2  # Steps' grid: the spaces between the time and the fields (a grid collapses its padding)


def _chunks(rows: Iterable[tuple[str, ...]], size: int) -> Iterator[list[tuple[str, ...]]]:
    """`rows` in lists of up to `size`."""
    it = iter(rows)
    while chunk := list(islice(it, size)):
        yield chunk
