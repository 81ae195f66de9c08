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

A run may also have a side consumer (SideConsumer): a second process, forked from this one, that gets the same
items and connection ends (the child writes each batch to it too) and hands back one result when they end. On
two cores the consumer's work is then split across two processes: a session storm's analysis spends half its
time in the savings estimate, which needs nothing of the rest of the analysis. Stopped early, the side consumer
ends with what it had read: a batch or so ahead of this process, as the report is.
"""

from __future__ import annotations

import dataclasses
import marshal
import os
import struct
from collections.abc import Callable, Iterator

from ..capture.reader import CaptureError
from ..capture.streams import STOP_WAIT, fork_child, in_forked_child, read_final, reap, write_all
from ..exchange import Exchange
from ..protocol.connection import OrphanResponse
from ..protocol.report import DecodeReport
from .items import plain, rebuilt, rows

__all__ = ["decoded_in_child", "SideConsumer"]

_BATCH_ROWS = 16384  # partition rows (or items) per batch: ~1 MB marshalled, one pipe's worth
_BATCH_ITEMS = 1024
_HEAD = struct.Struct("=I")
# Seconds a run stopped early waits for its side consumer's result: it is at most a pipe or two of items behind
# the decoding child (which writes each batch to both), so it has little left to do.
SIDE_STOP_WAIT = 10 * STOP_WAIT


class SideConsumer:
    """A second consumer of a run decoded in a child, in a process of its own: ``consume(items, ended)`` runs
    there over the items this process gets, with the ids of ended connections appended to ``ended`` between
    them as here, and its return value (pickled) is ``result`` once this process has read the items to the end
    (None: it failed or did not answer). ``running``: it was started (only a run decoded in a child has one);
    a consumer that finds it not running does the work itself. Once the items have been read to the end, the
    side consumer may still be at work: ``wait()`` for its result when it is needed (this process meanwhile does
    what it can without it), and always wait once, so that the process is reaped."""

    __slots__ = ("consume", "running", "result", "_ending")

    def __init__(self, consume: Callable[[Iterator[Exchange | OrphanResponse], list[int]], object]) -> None:
        self.consume = consume
        self.running = False
        self.result: object = None
        self._ending: tuple[int, int] | None = None  # (pid, its result's pipe) once fed everything

    def wait(self, timeout: float | None = None) -> object:
        """The result, once the process has sent it and is reaped (None: it failed; or, with a timeout, did not
        answer in time, and was killed)."""
        if self._ending is not None:
            (pid, fd), self._ending = self._ending, None
            try:
                self.result = read_final(fd, timeout)
            finally:
                os.close(fd)
                reap(pid)
        return self.result


def decoded_in_child(decode: Callable[[], Iterator[Exchange | OrphanResponse]], ended: list[int],
                     report: DecodeReport, side: SideConsumer | None = None) -> Iterator[Exchange | OrphanResponse]:
    """The items of `decode()`, run in a forked child that fills its copies of `ended` and `report`; this
    process's `ended` gets the ids between the items, and `report` the child's fields when it stops. The
    child's CaptureError is raised here; any other exception of it, as a RuntimeError with its text. `side`:
    also run it, in a process of its own fed the same items (SideConsumer)."""
    if side is None:
        yield from _decoded(decode, ended, report, None)
        return
    pid, side_fd, final_fd = _start_side(side)
    finished = False
    try:
        yield from _decoded(decode, ended, report, side_fd)
        finished = True
    finally:
        os.close(side_fd)  # (the decoding child's copy is closed as it ends: the side consumer then sees the end)
        side._ending = (pid, final_fd)
        if not finished:
            side.wait(SIDE_STOP_WAIT)  # stopped early: its last items are all it has left to do


def _decoded(decode, ended: list[int], report: DecodeReport, side_fd: int | None
             ) -> Iterator[Exchange | OrphanResponse]:
    outcome: list = []

    def took(message) -> None:
        outcome.append(message)
        if message is not None:  # the child's report, what it decoded also when this side stopped early
            for f in dataclasses.fields(DecodeReport):
                setattr(report, f.name, getattr(message[0], f.name))

    yield from in_forked_child(lambda fd: _child(decode, ended, report, fd, side_fd),
                               lambda pipe: _receive(pipe, ended), 1 << 20, took)
    if outcome[0] is None:
        raise CaptureError("the capture decoding process stopped unexpectedly")
    error = outcome[0][1]
    if error is not None:
        kind, text = error
        raise CaptureError(text) if kind == "capture" else RuntimeError(f"capture decoding process: {text}")


# -- the side consumer --------------------------------------------------------------------------------------
def _start_side(side: SideConsumer) -> tuple[int, int, int]:
    """Fork the side consumer's process: its pid, the pipe to write its batches to, the pipe of its result."""

    def consume(fd: int) -> object:
        ended: list[int] = []
        with open(fd, "rb", buffering=1 << 20) as pipe:
            return side.consume(_receive(pipe, ended), ended)

    started = fork_child(consume, child_writes=False)
    side.running = True
    return started


# -- the child ----------------------------------------------------------------------------------------------
def _child(decode, ended: list[int], report: DecodeReport, fd: int, side_fd: int | None = None
           ) -> tuple[DecodeReport, tuple | None]:
    """The items of `decode()` to `fd` (and `side_fd`); the final message: the run's report, and its error."""
    error = None
    items = decode()
    sink = _Sink(fd, side_fd)
    try:
        _send(items, ended, sink)
    except BrokenPipeError:
        pass  # the parent stopped reading: report what was decoded so far
    except CaptureError as exc:
        error = ("capture", str(exc))
    except Exception as exc:  # noqa: BLE001  (a bug: the parent re-raises it with this text)
        error = ("bug", f"{type(exc).__name__}: {exc}")
    finally:
        os.close(fd)  # the parent's end of the items, before the report it then reads
        sink.close_side()
        items.close()  # the run's own clean-up: the stats of the files read so far join the report
    return report, error


class _Sink:
    """Where the child writes its batches: the parent's pipe, and the side consumer's while it reads them (one
    that failed is left out: the parent's run goes on, and learns it from the missing result)."""

    __slots__ = ("fd", "side_fd")

    def __init__(self, fd: int, side_fd: int | None) -> None:
        self.fd, self.side_fd = fd, side_fd

    def write(self, data: bytes) -> None:
        write_all(self.fd, data)
        if self.side_fd is not None:
            try:
                write_all(self.side_fd, data)
            except OSError:
                self.close_side()

    def close_side(self) -> None:
        if self.side_fd is not None:
            os.close(self.side_fd)
            self.side_fd = None


def _send(items: Iterator, ended: list[int], sink: _Sink) -> None:
    batch: list = []
    size = 0
    for item in items:
        if ended:  # connections that ended before this item: the parent's consumer sees them before it
            batch.extend(ended)
            ended.clear()
        batch.append(plain(item))
        size += rows(item) + 1
        if size >= _BATCH_ROWS or len(batch) >= _BATCH_ITEMS:
            _flush(sink, batch)
            batch.clear()
            size = 0
    batch.extend(ended)  # the last ones: after every item
    ended.clear()
    _flush(sink, batch)


def _flush(sink: _Sink, batch: list) -> None:
    if batch:
        blob = marshal.dumps(batch)
        sink.write(_HEAD.pack(len(blob)) + blob)


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
