"""A whole decode run in a forked child: this process only rebuilds the finished items.

    for item in decoded_in_child(decode, ended, report):   # decode(): the run's own in-process generator
        ...

On a large capture the consumer (the analysis) is the busiest process. The child runs the decode run's own
in-process code (reading, reassembly, the Kafka layer: one code path) and sends each item as plain tuples
(items.py), in batches marshalled over a pipe; this process rebuilds them, identical and in the same order. A
connection's end (DecodeRun.ended) travels between the items as the id alone, so the consumer finds it in
`ended` exactly where it would have in one process.

The report travels once, on a second pipe, when the child stops: at the end, or when this process stops reading
early (a consumer that breaks off, Ctrl-C): closing the item pipe makes the child's next write fail, and it
then sends the report of what it decoded so far (a little ahead of what was consumed, as a reader is) before it
is reaped. A child that cannot answer within STOP_WAIT seconds is killed and the report stays as it was.
"""

from __future__ import annotations

import dataclasses
import marshal
import os
import struct
from collections.abc import Callable, Iterator

from ..capture.reader import CaptureError
from ..capture.streams import in_forked_child, write_all
from ..exchange import Exchange
from ..protocol.connection import OrphanResponse
from ..protocol.report import DecodeReport
from .items import plain, rebuilt, rows

__all__ = ["decoded_in_child"]

_BATCH_ROWS = 16384  # partition rows (or items) per batch: ~1 MB marshalled, one pipe's worth
_BATCH_ITEMS = 1024
_HEAD = struct.Struct("=I")


def decoded_in_child(decode: Callable[[], Iterator[Exchange | OrphanResponse]], ended: list[int],
                     report: DecodeReport) -> Iterator[Exchange | OrphanResponse]:
    """The items of `decode()`, run in a forked child that fills its copies of `ended` and `report`; this
    process's `ended` gets the ids between the items, and `report` the child's fields when it stops. The
    child's CaptureError is raised here; any other exception of it, as a RuntimeError with its text."""
    outcome: list = []

    def took(message) -> None:
        outcome.append(message)
        if message is not None:  # the child's report, what it decoded also when this side stopped early
            for f in dataclasses.fields(DecodeReport):
                setattr(report, f.name, getattr(message[0], f.name))

    yield from in_forked_child(lambda fd: _child(decode, ended, report, fd), lambda pipe: _receive(pipe, ended),
                               1 << 20, took)
    if outcome[0] is None:
        raise CaptureError("the capture decoding process stopped unexpectedly")
    error = outcome[0][1]
    if error is not None:
        kind, text = error
        raise CaptureError(text) if kind == "capture" else RuntimeError(f"capture decoding process: {text}")


# -- the child ----------------------------------------------------------------------------------------------
def _child(decode, ended: list[int], report: DecodeReport, fd: int) -> tuple[DecodeReport, tuple | None]:
    """The items of `decode()` to `fd`; the final message: the run's report, and its error."""
    error = None
    items = decode()
    try:
        _send(items, ended, fd)
    except BrokenPipeError:
        pass  # the parent stopped reading: report what was decoded so far
    except CaptureError as exc:
        error = ("capture", str(exc))
    except Exception as exc:  # noqa: BLE001  (a bug: the parent re-raises it with this text)
        error = ("bug", f"{type(exc).__name__}: {exc}")
    finally:
        os.close(fd)  # the parent's end of the items, before the report it then reads
        items.close()  # the run's own clean-up: the stats of the files read so far join the report
    return report, error


def _send(items: Iterator, ended: list[int], fd: int) -> None:
    batch: list = []
    size = 0
    for item in items:
        if ended:  # connections that ended before this item: the parent's consumer sees them before it
            batch.extend(ended)
            ended.clear()
        batch.append(plain(item))
        size += rows(item) + 1
        if size >= _BATCH_ROWS or len(batch) >= _BATCH_ITEMS:
            _flush(fd, batch)
            batch.clear()
            size = 0
    batch.extend(ended)  # the last ones: after every item
    ended.clear()
    _flush(fd, batch)


def _flush(fd: int, batch: list) -> None:
    if batch:
        blob = marshal.dumps(batch)
        write_all(fd, _HEAD.pack(len(blob)) + blob)


# -- the parent ---------------------------------------------------------------------------------------------
def _receive(pipe, ended: list[int]) -> Iterator[Exchange | OrphanResponse]:
    read = pipe.read
    size = _HEAD.size
    while True:
        head = read(size)
        if len(head) < size:
            return  # the end; the report says whether it was the whole run
        (n,) = _HEAD.unpack(head)
        blob = read(n)
        if len(blob) < n:
            return
        for record in marshal.loads(blob):
            if type(record) is int:
                ended.append(record)
            else:
                yield rebuilt(record)
