"""`decode --format table`: one row per exchange, kept on disk while the capture is read.

The table's widths and its time column (the date once in the header when every exchange is on one day) depend
on every row, so nothing can be printed before the last one is read. Holding the exchanges (and one rich Table of
all of them) took a 150,000-exchange capture 1.6 GB and minutes; here each exchange is a tuple of its shown fields,
marshalled in blocks to a temporary file, and the table is laid out from it a chunk at a time (fit.Steps).
"""

from __future__ import annotations

import marshal
import tempfile
from collections.abc import Iterator

from rich.console import Console
from rich.text import Text

from fetchtool.analysis.reports.fit import Steps
from fetchtool.analysis.reports.timefmt import utc
from fetchtool.commands.wording import count
from fetchtool.exchange import Exchange
from fetchtool.pipeline.jsonl import latency_ms
from fetchtool.printable import one_line

# Below this many columns the full table (16 columns) would not fit: time, frames, latency, client id, session
# and epoch, partitions, error and record bytes only (--format jsonl has everything).
WIDE_TABLE = 160
BLOCK_ROWS = 1000  # exchanges marshalled to the file at once


class ExchangeRows:
    """The exchanges' shown fields, in capture order, in a temporary file: add() them, then iterate as often as
    needed."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile()
        self._block: list[tuple] = []
        self.count = 0
        self.days: set[str] = set()  # at most two: one day or several is all the table needs

    def add(self, ex: Exchange) -> None:
        if ex.ts is not None and len(self.days) < 2:
            self.days.add(utc(ex.ts, "%Y-%m-%d"))
        api = ("Fetch" if ex.api_key == 1 else "FetchSnapshot") + f" v{ex.api_version}"
        self._block.append((ex.ts, ex.request_frame, ex.response_frame, latency_ms(ex), ex.client, ex.client_id,
                            ex.broker, api, ex.session_id, ex.session_epoch, ex.partitions, ex.forgotten,
                            ex.response_session_id, ex.error_code, ex.response_partition_count, ex.records_bytes))
        self.count += 1
        if len(self._block) >= BLOCK_ROWS:
            self._flush()

    def _flush(self) -> None:
        if self._block:
            data = marshal.dumps(self._block)  # length first: marshal.load on a file reads it in small pieces
            self._file.write(len(data).to_bytes(4, "little") + data)
            self._block = []

    def __iter__(self) -> Iterator[tuple]:
        self._flush()
        self._file.seek(0)
        while size := self._file.read(4):
            yield from marshal.loads(self._file.read(int.from_bytes(size, "little")))

    def close(self) -> None:
        self._file.close()


class _Cells:
    """The rows' cells as the table shows them, made again on each pass over the rows."""

    def __init__(self, rows: ExchangeRows, wide: bool, one_day: bool) -> None:
        self.rows, self.wide = rows, wide
        self.clock = "%H:%M:%S.%f" if one_day else "%Y-%m-%d %H:%M:%S.%f"

    def __iter__(self) -> Iterator[tuple[str, ...]]:
        clock, wide = self.clock, self.wide
        for (ts, req, resp, latency, client, client_id, broker, api, session, epoch, parts, forgot, resp_session,
             error, resp_parts, records) in self.rows:
            when = None if ts is None else utc(ts, clock)
            ms = None if latency is None else f"{latency:,.1f}"
            cells: tuple[object, ...]
            if wide:
                cells = (when, req, resp, ms, client, client_id, broker, api, session, epoch, parts, forgot,
                         resp_session, error, resp_parts, _thousands(records))
            else:
                cells = (when, f"{req}/{_cell(resp)}", f"{ms or '-'} ms", client_id, f"{_cell(session)}:{_cell(epoch)}",
                         f"{parts}-{forgot}", error, f"{_thousands(records)} B")
            yield tuple(_cell(v) for v in cells)


def print_exchange_table(console: Console, rows: ExchangeRows) -> None:
    """The exchanges, one a row: every field on a console of WIDE_TABLE columns or more, else the ones above; as
    a table when they fit whole, else each exchange's fields wrapped beside its time (fit.Steps): no id is cut.
    Printed a piece at a time (rich keeps a whole print's output until it ends)."""
    one_day = len(rows.days) == 1
    clock = f"{next(iter(rows.days))} UTC" if one_day else "time (UTC)"  # the date once, in the header
    cells = _Cells(rows, console.width >= WIDE_TABLE, one_day)
    if cells.wide:
        head: tuple[str, ...] = (clock, "req", "resp", "ms", "client", "client id", "broker", "api", "session",
                                 "epoch", "parts", "forgot", "resp session", "error", "resp parts", "records B")
    else:
        head = (clock, "frames", "latency", "client id", "session:epoch", "parts", "error", "records")
    for part in Steps(head, cells, count(rows.count, "exchange")).parts(console.width):
        console.print(part)
    if not cells.wide:
        console.print(Text(f"parts: partitions sent - forgotten; --width {WIDE_TABLE} or more for every column",
                           style="dim"))


def _thousands(value):
    return f"{value:,}" if isinstance(value, int) else value


def _cell(value) -> str:
    if value is None:
        return "-"
    if type(value) is not str:
        return str(value)
    text = _shown.get(value)
    if text is None:
        if len(_shown) >= 4096:  # the names repeat (client ids, brokers); a storm's 100,000 client ports do not
            _shown.clear()
        text = _shown[value] = one_line(value)  # a newline in a client id forges no row
    return text


_shown: dict[str, str] = {}
