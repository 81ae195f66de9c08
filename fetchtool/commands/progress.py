"""A progress bar on stderr for long captures; silent when stderr is not a terminal.

Progress is the Kafka bytes decoded so far against the size of the capture files: on a capture of Fetch
traffic those bytes are nearly all of the file, and the estimate never runs past the end.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from fetchtool.exchange import Exchange

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

# Below this a bar would only flicker.
MIN_BYTES_FOR_BAR = 20 * 1024 * 1024


class CaptureProgress:
    def __init__(self, captures: list[Path], console: Console) -> None:
        self.total = sum(os.path.getsize(p) for p in captures if os.path.isfile(p))
        self.enabled = console.is_terminal and self.total >= MIN_BYTES_FOR_BAR
        self.done = 0
        self._bar: Progress | None = None
        if self.enabled:  # rich.progress is imported only to draw a bar: a pipe or a small capture never needs it
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

            self._bar = Progress(TextColumn("decoding"), BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                                 console=console, transient=True)
        self._task: TaskID | None = None  # the bar's task, once entered

    def __enter__(self) -> CaptureProgress:
        if self._bar is not None:
            self._bar.start()
            self._task = self._bar.add_task("decode", total=self.total)
        return self

    def advance(self, exchange: Exchange) -> None:
        if self._bar is None or self._task is None:
            return
        self.done = min(self.total, self.done + (exchange.request_bytes or 0) + (exchange.response_bytes or 0))
        self._bar.update(self._task, completed=self.done)

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.stop()
