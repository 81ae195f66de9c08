"""Sans-IO Kafka framing for one direction of one connection: stream bytes in, complete frames out.

Every Kafka message is `int32 size` + `size` bytes. Bytes arrive in whatever pieces TCP reassembly produced
(a 1 MB response typically in 64 KB pieces), so the framer keeps a list of pieces and joins them once, when
the frame they belong to is complete: no quadratic copying.

After lost bytes (a StreamGap) the partial frame is dropped. If the gap lies inside a frame whose size we
already know, the next frame starts at a known position and we skip exactly to it. Otherwise the framer
resynchronises: a `scanner` supplied by the connection (it knows what a plausible request or a response to a
pending correlation id looks like) finds the next frame start. Absurd sizes also trigger a resync, never an
allocation. Skipped bytes and dropped frames are counted.
"""

from __future__ import annotations

from struct import Struct
from typing import Callable, NamedTuple

MAX_FRAME = 256 * 1024 * 1024  # larger sizes are noise: Kafka's socket.request.max.bytes defaults to 100 MB
_SIZE = Struct(">i")
_NO_FRAMES: tuple = ()

# scanner(buf, start) -> (frame start or None, keep_from). With None, bytes from keep_from on must be kept
# because a frame may start there once more bytes arrive; everything before it is skipped.
Scanner = Callable[[memoryview, int], "tuple[int | None, int]"]


class Frame(NamedTuple):
    payload: memoryview  # the message after its size prefix (header + body)
    frame: int  # capture frame number of the packet whose bytes completed the message
    ts: float  # that packet's timestamp
    size: int  # whole frame incl. the 4-byte size prefix


class Framer:
    def __init__(self, scanner: Scanner, *, synced: bool = True, min_size: int = 4, max_size: int = MAX_FRAME):
        self._scanner = scanner
        self._min = min_size
        self._max = max_size
        self._chunks: list[bytes | memoryview] = []
        self._have = 0  # bytes buffered in _chunks
        self._need = 4  # bytes needed before parsing makes progress
        self._skip = 0  # bytes still to discard (rest of a frame cut by a gap)
        self.resyncing = not synced
        self.skipped_bytes = 0  # bytes discarded while resynchronising or skipping a cut frame
        self.dropped_frames = 0  # partial frames dropped because of a gap
        self.bad_sizes = 0  # absurd size prefixes that forced a resync
        self.frames = 0

    @property
    def buffered(self) -> int:
        return self._have

    def gap(self, lost_bytes: int) -> None:
        """`lost_bytes` never arrived: drop the partial frame and find the next frame start."""
        if self.resyncing:
            self.skipped_bytes += self._have
            self._clear()
            return
        if self._have >= 4:
            size = _SIZE.unpack_from(self._join(), 0)[0]
            remaining = 4 + size - self._have
            self.dropped_frames += 1
            self.skipped_bytes += self._have
            self._clear()
            if lost_bytes < remaining:
                self._skip = remaining - lost_bytes  # the gap lies inside this frame: its end is known
                self.skipped_bytes += self._skip
                return
        else:
            self.skipped_bytes += self._have
            self._clear()
        self.resyncing = True

    def feed(self, data: bytes, frame: int, ts: float) -> list[Frame] | tuple[()]:
        if self._skip:
            n = min(self._skip, len(data))
            self._skip -= n
            data = data[n:] if n < len(data) else b""
        if not data:
            return _NO_FRAMES
        self._chunks.append(data)
        self._have += len(data)
        if self._have < self._need:
            return _NO_FRAMES  # mid-frame: most segments of a large response end here
        buf = memoryview(self._join())
        end = len(buf)
        pos = 0
        out: list[Frame] = []
        unpack = _SIZE.unpack_from
        while True:
            if self.resyncing:
                start, keep = self._scanner(buf, pos)
                if start is None:
                    self.skipped_bytes += keep - pos
                    pos = keep
                    self._need = end - pos + 1  # rescan once more bytes arrive
                    break
                self.skipped_bytes += start - pos
                pos = start
                self.resyncing = False
            if end - pos < 4:
                self._need = 4
                break
            size = unpack(buf, pos)[0]
            if size < self._min or size > self._max:
                self.bad_sizes += 1
                self.resyncing = True
                self.skipped_bytes += 1
                pos += 1
                continue
            stop = pos + 4 + size
            if stop > end:
                self._need = stop - pos
                break
            out.append(Frame(buf[pos + 4 : stop], frame, ts, size + 4))
            pos = stop
        self.frames += len(out)
        rest = end - pos
        if rest:
            # Keep only the unconsumed tail (at most one partial frame), as its own piece.
            self._chunks = [bytes(buf[pos:])] if out or pos else [buf.obj]
        else:
            self._chunks = []
        self._have = rest
        return out

    def _join(self) -> bytes:
        chunks = self._chunks
        if len(chunks) == 1:
            c = chunks[0]
            return c if isinstance(c, bytes) else bytes(c)
        joined = b"".join(chunks)
        self._chunks = [joined]
        return joined

    def _clear(self) -> None:
        self._chunks = []
        self._have = 0
        self._need = 4
