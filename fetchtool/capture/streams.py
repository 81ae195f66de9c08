"""A capture's ordered TCP stream events, read in this process or in a second one.

    reads = [FileRead(p) for p in rotated_set]     # one file, or a capture cut in pieces (capture/rotation.py)
    for event in stream_set_events(reads):         # StreamData / StreamGap / ConnectionClosed, in file order:
        ...                                        # one reassembly across the files, frames counting on;
                                                   # each read's .stats and .error are set as it is read

Reading, link layers and reassembly are ~40% of a decode and do not depend on the Kafka layer after them, so on
a large capture they run in a forked child while this process decodes Kafka: the two halves overlap on two
cores. The child sends its events in batches over a pipe (a packed descriptor per event, the payload bytes,
each Endpoint once) and this process rebuilds identical frozen events, in the same order (or, for a consumer that
asks for runs, a batch's consecutive data of one direction as one events.StreamRun). The child's stats
and errors travel at the end, on a pipe of their own: also when the consumer stops early (a closed pipe,
Ctrl-C), the child's next write then failing; it is then reaped (killed if it does not answer in STOP_WAIT).
Small, compressed or unforkable inputs are read in this process: a fork is not worth it there.

A set's files go through one TcpReassembler, in order: frames of a file count on from the packets of the files
before it, and a file that cannot be read is that file's error (FileRead.error), not the end of the set.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import pickle
import select
import signal
import struct
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO, TypeVar

from .._fast import fast_constructor
from .events import ConnectionClosed, Endpoint, StreamData, StreamEvent, StreamGap, StreamRun
from .packets import CaptureStats, iter_segments
from .reader import PCAPNG_SHB, PCAP_MAGICS, RELEASE_EVERY, CaptureError
from .reassembly import TcpReassembler

__all__ = ["stream_set_events", "stream_set_events_here", "stream_set_events_in_child", "FileRead",
           "BACKGROUND_MIN_BYTES", "worth_a_child", "in_forked_child", "write_all"]

BACKGROUND_MIN_BYTES = 16 * 1024 * 1024  # below this the fork costs more than the overlap gains
_BATCH_BYTES = 1 << 20
_BATCH_EVENTS = 512
STOP_WAIT = 2.0  # seconds a consumer that stops early waits for a child's final message before killing it
T = TypeVar("T")
ENDPOINT_SLOTS = 4096  # endpoints numbered at once between the reader process and this one

_DATA, _GAP, _CLOSED, _ENDPOINT, _FILE = range(5)
_REASONS = ("fin", "rst", "reused", "end_of_capture")
# kind, conn, src, dst, frame, ts, length (data) / lost bytes / reason, file offset of the data (-1: in the batch)
_DESC = struct.Struct("=BIIIIdQq")
_HEAD = struct.Struct("=iI")  # descriptors in the batch, data bytes
_data = fast_constructor(StreamData)
_gap = fast_constructor(StreamGap)
_closed = fast_constructor(ConnectionClosed)
_stream_run = fast_constructor(StreamRun)


def _run(conn: int, src: Endpoint, dst: Endpoint, pieces: list, frames: list[int], tss: list[float],
         ends: list[int]) -> StreamData | StreamRun:
    if len(pieces) == 1:
        return _data(conn, src, dst, pieces[0], frames[0], tss[0])
    return _stream_run(conn, src, dst, pieces, frames, tss, ends)


@dataclass
class FileRead:
    """One file of a capture as it was read: what the capture layer counted, and the error that stopped its
    reading (CaptureError or OSError; None when it was read to its end)."""

    path: str | os.PathLike
    stats: CaptureStats = field(default_factory=CaptureStats)
    error: Exception | None = None


def stream_set_events(reads: list[FileRead], runs: bool = False) -> Generator[StreamEvent | StreamRun, None, None]:
    """The events of several files read as one capture (a rotated set), in a child process when the files are
    large enough to gain from it. Each file's stats and error land in its FileRead; nothing is raised for them.
    `runs`: a consumer that takes StreamRun events (see _receive) may get them, from the child."""
    if worth_a_child(*(r.path for r in reads)):
        return stream_set_events_in_child(reads, runs)
    return stream_set_events_here(reads)


def stream_set_events_here(reads: list[FileRead]) -> Generator[StreamEvent, None, None]:
    """stream_set_events, read in this process."""
    reasm = TcpReassembler()
    frame, ts, offset = 0, 0.0, 0
    for read in reads:
        try:
            for seg in iter_segments(read.path, read.stats, offset):
                frame, ts = seg.frame, seg.ts
                yield from reasm.feed(seg)
        except (CaptureError, OSError) as exc:
            read.error = exc
        offset += read.stats.packets
    yield from reasm.finish(frame, ts)


def worth_a_child(*paths) -> bool:
    """Whether reading `paths` in a forked child gains: two cores, a fork, large uncompressed captures."""
    if not hasattr(os, "fork") or (os.cpu_count() or 1) < 2 or os.environ.get("FETCHTOOL_ONE_PROCESS"):
        return False
    try:
        if sum(os.path.getsize(p) for p in paths) < BACKGROUND_MIN_BYTES:
            return False
        for p in paths:
            with open(p, "rb") as fh:  # uncompressed captures: gzip streams are read where they are decoded
                magic = struct.unpack("<I", fh.read(4).ljust(4, b"\0"))[0]
            if magic not in PCAP_MAGICS and magic != PCAPNG_SHB:
                return False
        return True
    except OSError:
        return False  # the in-process reader reports it as one line


def stream_set_events_in_child(reads: list[FileRead], runs: bool = False
                               ) -> Generator[StreamEvent | StreamRun, None, None]:
    """stream_set_events, with the reading and reassembly done by a forked child."""
    paths = [r.path for r in reads]
    final: list = []

    def took(message) -> None:
        final.append(message)
        if message is not None:
            _take_final(reads, message[0])

    yield from in_forked_child(lambda fd: _child(paths, fd), lambda pipe: _receive(pipe, reads, runs), _BATCH_BYTES,
                               took)
    if final[0] is None:
        raise CaptureError(f"{reads[0].path}: the capture reader process stopped unexpectedly")
    if final[0][1] is not None:
        raise RuntimeError(f"capture reader process: {final[0][1]}")


def in_forked_child(child: Callable[[int], Any], receive: Callable[[BinaryIO], Iterator[T]], buffering: int,
                    on_final: Callable[[Any], None]) -> Generator[T, None, None]:
    """Fork a child that runs `child(fd)`, Ctrl-C ignored (the parent's to handle: it stops the child), and yield
    what `receive` reads from `fd`'s pipe. `child` writes to `fd`, closes it and returns its final message (its
    counts, its error), which travels pickled on a second pipe. However this side ends (read to the end, stopped
    early, Ctrl-C), `on_final` gets that message (None if the child died or did not answer in time), and the child
    is killed and reaped. Stopped early, the child's next write fails on the closed pipe: `child` then returns
    what it has so far."""
    pid, r, final_r = fork_child(child, child_writes=True)
    finished = False
    final = None
    try:
        with open(r, "rb", buffering=buffering) as pipe:
            yield from receive(pipe)
        finished = True
    finally:
        try:
            final = read_final(final_r, None if finished else STOP_WAIT)
        finally:
            os.close(final_r)
            reap(pid)
        on_final(final)


def fork_child(child: Callable[[int], Any], child_writes: bool) -> tuple[int, int, int]:
    """Fork a child that runs `child(fd)` on its end of a new pipe (the writing end if `child_writes`, else the
    reading one), Ctrl-C ignored (the parent's to handle), and sends what it returns, pickled, on a second pipe
    as it ends (read_final; nothing if it fails). Returns the child's pid, this process's end of the pipe and the
    final message's pipe; the child never returns, not even for a Ctrl-C that comes before it ignores them."""
    r, w = os.pipe()
    final_r, final_w = os.pipe()
    grow_pipe(w)
    mine, theirs = (r, w) if child_writes else (w, r)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(mine)
            os.close(final_r)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            write_all(final_w, pickle.dumps(child(theirs), pickle.HIGHEST_PROTOCOL))
            code = 0
        except BaseException:  # noqa: BLE001  (a dead parent, or a failed child: the parent gets no message)
            pass
        finally:
            os._exit(code)
    os.close(theirs)
    os.close(final_w)
    return pid, mine, final_r


def _take_final(reads: list[FileRead], files: list) -> None:
    for r, (stats, error) in zip(reads, files):
        r.stats.merge(stats)
        if error is not None:
            r.error = CaptureError(error[1]) if error[0] == "capture" else OSError(error[1], error[2], error[3])


def read_final(fd: int, timeout: float | None):
    """The object a forked child pickled into pipe `fd` as it ended, or None when it sent none (it died, or did
    not answer within `timeout` seconds)."""
    chunks = []
    while True:
        if timeout is not None and not select.select([fd], [], [], timeout)[0]:
            return None
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    if not chunks:
        return None
    try:
        return pickle.loads(b"".join(chunks))
    except Exception:  # noqa: BLE001  (cut short: the child died while writing it)
        return None


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


# -- the child ----------------------------------------------------------------------------------------------
def _child(paths: list, fd: int) -> tuple[list[list], str | None]:
    """The events of `paths` to `fd`; the final message: each file's stats and error, and a bug's text."""
    files: list[list] = []  # per file: [stats, error or None], the current file's stats as they grow
    bug = None
    try:
        with open(fd, "wb", buffering=_BATCH_BYTES) as out:
            _send(out, paths, files)
    except BrokenPipeError:
        pass  # the parent stopped reading: it gets the counts so far
    except Exception as exc:  # noqa: BLE001  (a bug: the parent re-raises it with this text)
        bug = f"{type(exc).__name__}: {exc}"
    return files, bug


def _send(out, paths: list, files: list[list]) -> None:
    # -> its number in the batches, oldest first: at most ENDPOINT_SLOTS, the oldest's number reused for a new
    # one (both processes hold one entry per number, not one per endpoint ever seen: 200,000 on a session storm).
    # An OrderedDict: the oldest of a plain dict, popped again and again, is found by walking over the deleted
    # entries before it (a storm's new port per connection: 4.5% of the reader's time).
    endpoints: OrderedDict[Endpoint, int] = OrderedDict()
    descs: list[bytes] = []
    data: list[bytes] = []
    pack = _DESC.pack

    def ep(e: Endpoint, keep: Endpoint | None = None) -> int:
        i = endpoints.get(e)
        if i is None:
            if len(endpoints) < ENDPOINT_SLOTS:
                i = len(endpoints)
            else:  # reuse the oldest number, never the one the same event names beside it (``keep``)
                old = next(iter(endpoints))
                if old == keep:
                    endpoints.move_to_end(old)  # now the newest
                    old = next(iter(endpoints))
                i = endpoints.pop(old)
            endpoints[e] = i
            ip = e.ip.encode()
            descs.append(pack(_ENDPOINT, i, e.port, 0, 0, 0.0, len(ip), -1))
            data.append(ip)
        return i

    def flush() -> None:
        blob = b"".join(data)
        out.write(_HEAD.pack(len(descs), len(blob)))
        out.write(b"".join(descs))
        out.write(blob)
        out.flush()  # now: the parent decodes this batch while we read the next
        descs.clear()
        data.clear()

    numbered = endpoints.get

    def put(ev, payload=None, at: int = -1) -> None:
        kind = type(ev)
        if kind is StreamData:
            d = ev.data
            src, dst = ev.src, ev.dst
            # both endpoints numbered already (nearly every packet): no call to ep()
            a, b = numbered(src), numbered(dst)
            if a is None or b is None:
                a, b = ep(src), ep(dst, src)
            if d is payload and at >= 0:  # the segment's bytes as captured: the parent reads them itself
                descs.append(pack(_DATA, ev.conn, a, b, ev.frame, ev.ts, len(d), at))
            else:  # released out-of-order data, a trimmed retransmission: its bytes travel in the batch
                descs.append(pack(_DATA, ev.conn, a, b, ev.frame, ev.ts, len(d), -1))
                data.append(d)
        elif kind is StreamGap:
            descs.append(pack(_GAP, ev.conn, ep(ev.src), ep(ev.dst, ev.src), ev.frame, ev.ts, ev.lost_bytes, -1))
        else:
            descs.append(pack(_CLOSED, ev.conn, 0, 0, ev.frame, ev.ts, _REASONS.index(ev.reason), -1))

    reasm = TcpReassembler()
    frame, ts, offset = 0, 0.0, 0
    try:
        for i, path in enumerate(paths):
            if i:  # the parent maps this file now: the data references that follow are offsets in it
                descs.append(pack(_FILE, i, 0, 0, 0, 0.0, 0, -1))
            stats = CaptureStats()
            files.append([stats, None])
            try:
                for seg in iter_segments(path, stats, offset):
                    frame, ts, payload, at = seg.frame, seg.ts, seg.payload, seg.at
                    for ev in reasm.feed(seg):
                        put(ev, payload, at)
                    if len(descs) >= _BATCH_EVENTS:
                        flush()
            except CaptureError as exc:
                files[-1][1] = ("capture", str(exc))
            except BrokenPipeError:
                raise  # the parent's end of the pipe (flush), not this file
            except OSError as exc:
                files[-1][1] = ("os", exc.errno, exc.strerror, exc.filename)
            offset += stats.packets
        for ev in reasm.finish(frame, ts):
            put(ev)
    except BrokenPipeError:
        raise
    except Exception:
        flush()  # the events read before a bug, then the bug (the parent raises it after them)
        raise
    flush()


# -- the parent ---------------------------------------------------------------------------------------------
def _receive(pipe, reads: list[FileRead], runs: bool = False) -> Iterator[StreamEvent | StreamRun]:
    """The child's batches as events. With `runs`, consecutive data of one direction of one connection in a
    batch comes as one StreamRun (a single piece as StreamData): the consumer handles a message's many packets
    at once (events.StreamRun)."""
    endpoints: list[Endpoint] = []
    pieces: list = []  # the run being gathered: its pieces, their frames, timestamps and running length
    frames: list[int] = []
    tss: list[float] = []
    ends: list[int] = []
    total = 0
    run_conn = run_a = run_b = -1
    read = pipe.read
    unpack = _DESC.iter_unpack
    size = _DESC.size
    file = _Mapped(reads[0].path)
    try:
        mm = file.view  # events hold views of the capture's own bytes: no copy until framing joins them
        while True:
            head = read(_HEAD.size)
            if len(head) < _HEAD.size:
                break  # the end: the child's final message says whether of the whole capture
            count, nbytes = _HEAD.unpack(head)
            descs = read(count * size)
            blob = read(nbytes)
            pos = 0
            at = -1
            for kind, conn, a, b, frame, ts, n, at in unpack(descs):
                if kind == _DATA:
                    if at >= 0:
                        data = mm[at:at + n]
                    else:
                        data = blob[pos:pos + n]
                        pos += n
                    if not runs or not n:
                        yield _data(conn, endpoints[a], endpoints[b], data, frame, ts)
                    elif conn == run_conn and a == run_a and b == run_b:  # the run goes on
                        pieces.append(data)
                        frames.append(frame)
                        tss.append(ts)
                        total += n
                        ends.append(total)
                    else:
                        if pieces:
                            yield _run(run_conn, endpoints[run_a], endpoints[run_b], pieces, frames, tss, ends)
                        run_conn, run_a, run_b = conn, a, b
                        pieces, frames, tss, ends, total = [data], [frame], [ts], [n], n
                    continue
                if pieces:
                    yield _run(run_conn, endpoints[run_a], endpoints[run_b], pieces, frames, tss, ends)
                    pieces, run_conn = [], -1
                if kind == _GAP:
                    yield _gap(conn, endpoints[a], endpoints[b], n, frame, ts)
                elif kind == _CLOSED:
                    yield _closed(conn, _REASONS[n], frame, ts)
                elif kind == _ENDPOINT:  # endpoint number `conn` is (now) this one
                    e = Endpoint(blob[pos:pos + n].decode(), a)
                    if conn < len(endpoints):
                        endpoints[conn] = e
                    else:
                        endpoints.append(e)
                    pos += n
                else:  # _FILE: the next file of the set
                    file.close()
                    file = _Mapped(reads[conn].path)
                    mm = file.view
            if pieces:  # runs end with their batch
                yield _run(run_conn, endpoints[run_a], endpoints[run_b], pieces, frames, tss, ends)
                pieces, run_conn = [], -1
            file.release(at)  # the batch's last reference (-1 when it had none: nothing to release yet)
    finally:
        file.close()


class _Mapped:
    """This process's own read-only map of the capture, handing pages back as the child's references pass
    them (as the reader does), so a 1 GB capture does not become 1 GB of resident memory here either. A file
    that cannot be mapped (empty, gone) has no view: the child sends no reference into it, only its error."""

    def __init__(self, path):
        self.mm = self.view = None
        self._released = 0
        try:
            with open(path, "rb") as fh:
                self.mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            self.view = memoryview(self.mm)
        except (OSError, ValueError):
            pass

    def release(self, pos: int) -> None:
        stop = pos - pos % mmap.PAGESIZE
        if (self.mm is not None and stop - self._released >= RELEASE_EVERY and hasattr(mmap, "MADV_DONTNEED")):
            self.mm.madvise(mmap.MADV_DONTNEED, self._released, stop - self._released)
            self._released = stop

    def close(self) -> None:
        if self.mm is None:
            return
        self.view = None
        try:
            self.mm.close()
        except BufferError:
            pass  # events still alive hold views: the map goes when the last of them does
        self.mm = None


def reap(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)  # a no-op race when it already exited: it is a zombie until reaped
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)


def grow_pipe(fd: int) -> None:
    # Linux pipes hold 64 KB by default; a batch-sized pipe halves the context switches.
    if not hasattr(fcntl, "F_SETPIPE_SZ"):
        return
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _BATCH_BYTES)
    except OSError:
        pass  # capped by /proc/sys/fs/pipe-max-size for unprivileged users: the default works too
