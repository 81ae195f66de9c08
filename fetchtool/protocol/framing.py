"""Sans-IO Kafka framing for one direction of one connection: stream bytes in, complete frames out.

Every Kafka message is `int32 size` + `size` bytes. Bytes arrive in whatever pieces TCP reassembly produced
(a 1 MB response typically in 64 KB pieces), so the framer keeps a list of pieces and joins them once, when
the frame they belong to is complete: no quadratic copying.

After lost bytes (a StreamGap) the partial frame is dropped. If the gap lies inside a frame whose size we
already know, the next frame starts at a known position and we skip exactly to it. Otherwise the framer
resynchronises: a `scanner` supplied by the connection (it knows what a plausible request or a response to a
pending correlation id looks like) finds the next frame start. Absurd sizes also trigger a resync, never an
allocation. Skipped bytes and dropped frames are counted.

A damaged size prefix (a capture tool's corruption, not anything a peer sends: Kafka closes the connection on
a size beyond socket.request.max.bytes) is the one place where the framer alone cannot tell where the next
frame starts. Each such resync is reported in `damage` (where the bad prefix was, where framing resumed) for
the connection to warn about, and `reframe()` lets the connection reject a size the other direction has since
proved wrong (the broker answered a request that the pending frame would still be swallowing).

A framer that starts unsynced (a connection seen without its SYN: the capture may begin inside a message) scans
for its first frame start like any resync; bytes it skips before that first frame are reported once, in
`mid_start`, as a capture that began mid-message, never as a bad size. While it scans, it remembers which packet
delivered which bytes, so frames found in bytes held back for a scanner's decision keep their own packet's frame.
"""

from __future__ import annotations

from bisect import bisect_left
from struct import Struct
from typing import Callable, NamedTuple

MAX_FRAME = 256 * 1024 * 1024  # larger sizes are noise: Kafka's socket.request.max.bytes defaults to 100 MB
_SIZE = Struct(">i")
_NO_FRAMES: tuple = ()

# scanner(buf, start) -> (frame start or None, keep_from[, need]). With None, bytes from keep_from on must be kept
# because a frame may start there once more bytes arrive; everything before it is skipped. The optional `need`
# (bytes from keep_from) says how many the scanner must see before it can decide: the framer does not call it
# again sooner, so waiting for a long candidate frame costs nothing per packet.
Scanner = Callable[[memoryview, int], "tuple[int | None, int] | tuple[None, int, int]"]


class Frame(NamedTuple):
    payload: memoryview  # the message after its size prefix (header + body)
    frame: int  # capture frame number of the packet whose bytes completed the message
    ts: float  # that packet's timestamp
    size: int  # whole frame incl. the 4-byte size prefix


class Damage(NamedTuple):
    """One resync after a size prefix the framer could not believe."""

    frame: int  # capture frame of the packet that carried the bad prefix (its first buffered byte)
    size: int  # the size the prefix claimed
    resumed_frame: int | None  # packet where framing resumed (None: not before the stream ended)
    skipped: int  # bytes discarded between the bad prefix and the resumed frame start


class MidStart(NamedTuple):
    """The stream began inside a message: bytes before the first frame start found were skipped."""

    frame: int  # capture frame of the first packet of the stream
    resumed_frame: int | None  # packet where the first frame starts (None: none found before the stream ended)
    skipped: int  # bytes skipped before that frame start


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
        self.damage: list[Damage] = []  # resyncs after bad sizes, for the owner to report and clear
        self._first_frame = 0  # packet that delivered the first buffered byte
        self._last = (0, 0.0)  # (frame, ts) of the last packet fed
        self._bad: tuple[int, int, int] | None = None  # (frame, size, skipped_bytes then) of the last bad size
        self.mid_start: MidStart | None = None  # set once, when an unsynced stream's first frame start is found
        self._opening = not synced  # an unsynced stream before its first frame start: skipped bytes = mid-message
        self._lead: int | None = None  # that stream's first packet
        # (buffer offset where a packet's bytes end, frame, ts) while resyncing: dates frames in held-back bytes
        self._marks: list[tuple[int, int, float]] = []

    @property
    def buffered(self) -> int:
        return self._have

    def gap(self, lost_bytes: int) -> None:
        """`lost_bytes` never arrived: drop the partial frame and find the next frame start."""
        if self.resyncing:
            self.skipped_bytes += self._have
            self._clear()
            return
        self._bad = None  # a gap, not a bad prefix, is what cut this frame
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
        if not self._have and len(data) >= 4 and (not self.resyncing or (self._opening and self._lead is None)):
            # Fast path, as _parse would frame it: a packet that holds exactly one whole frame, on a synced stream
            # or as the very first packet of an unsynced one whose scanner finds the frame's start at its first
            # byte (a connection seen from its SYN).
            size = _SIZE.unpack_from(data, 0)[0]
            if size + 4 == len(data) and self._min <= size <= self._max:
                # a copy, as _join makes: a view of the capture's mapped bytes must not outlive its batch
                raw = data if type(data) is bytes else bytes(data)
                if self.resyncing:
                    if self._scanner(memoryview(raw), 0)[0] != 0:
                        data = raw  # (the scan below asks again, of the same bytes: the same answer)
                    else:
                        self._lead = frame
                        self.resyncing = self._opening = False
                if not self.resyncing:
                    self._first_frame = frame
                    self._last = (frame, ts)
                    self._need = 4
                    self.frames += 1
                    return [Frame(memoryview(raw)[4:], frame, ts, len(data))]
        if not self._have:
            self._first_frame = frame
        if self._opening and self._lead is None:
            self._lead = frame  # the stream's first packet, for a mid-message start
        self._last = (frame, ts)
        self._chunks.append(data)
        self._have += len(data)
        if self.resyncing:
            self._marks.append((self._have, frame, ts))
        if self._have < self._need:
            return _NO_FRAMES  # mid-frame: most segments of a large response end here
        return self._parse(0, len(data), frame, ts)

    def feed_within_frame(self, pieces: list, ends: list[int], frames: list[int], tss: list[float], i: int) -> int:
        """Take pieces i, i+1, ... of a run (capture.events.StreamRun: consecutive packets of this direction)
        that only add to the frame being filled, none completing it; returns the index of the first piece not
        taken (i when none is). The framer ends as feeding them one by one leaves it, without a call per packet.
        Only the plain case is taken: a synced stream, mid-frame, with nothing to report."""
        if self._skip or self.resyncing or not self._have or self.damage or self.mid_start is not None:
            return i
        base = ends[i - 1] if i else 0
        j = bisect_left(ends, base + self._need - self._have, i)  # pieces before j leave the frame short
        if j > i:
            self._chunks.extend(pieces[i:j])
            self._have += ends[j - 1] - base
            self._last = (frames[j - 1], tss[j - 1])
        return j

    @property
    def at_stream_start(self) -> bool:
        """Is nothing consumed yet of an unsynced stream (the scanner is looking at its very first byte)?"""
        return self._opening and not self.skipped_bytes

    def pending_frame(self) -> bool:
        """Is a frame started (its size read) but not complete?"""
        return not self.resyncing and self._have >= 4

    def peek(self) -> bytes:
        """The buffered bytes (the pending frame, size prefix first)."""
        return self._join()

    def resize_pending(self, size: int) -> list[Frame] | tuple[()]:
        """The pending frame's size prefix is wrong and the owner knows the true size (the other direction
        proved where the frame ends): frame it with that size and go on from there, returning the frames now
        complete. They are dated by the last packet fed: the buffer no longer says which packet completed each."""
        buf = self._join()
        if not self.pending_frame() or not self._min <= size <= len(buf) - 4:
            return _NO_FRAMES
        self.bad_sizes += 1
        frame, ts = self._last
        self.damage.append(Damage(self._first_frame, _SIZE.unpack_from(buf, 0)[0], frame, 0))
        self._chunks = [_SIZE.pack(size) + buf[4:]]
        return self._parse(0, 0, frame, ts)

    def end(self) -> None:
        """The stream ended: a resync still looking for its frame start is reported unresumed."""
        if self._opening and self._lead is not None and self.skipped_bytes + self._have:
            self.mid_start = MidStart(self._lead, None, self.skipped_bytes + self._have)
        self._opening = False
        if self._bad is not None and self.resyncing:
            bad_frame, size, mark = self._bad
            self.damage.append(Damage(bad_frame, size, None, self.skipped_bytes + self._have - mark))
        self._bad = None

    def _bad_size(self, at_frame: int, size: int) -> None:
        self.bad_sizes += 1
        self.resyncing = True
        if self._bad is None:  # a resync already under way keeps reporting its first bad prefix
            self._bad = (at_frame, size, self.skipped_bytes)

    def _parse(self, pos: int, fresh: int, frame: int, ts: float) -> list[Frame]:
        """Frames from the buffered bytes, starting at `pos`; the last `fresh` bytes came with packet `frame`."""
        joined = self._join()
        buf = memoryview(joined)
        end = len(buf)
        out: list[Frame] = []
        unpack = _SIZE.unpack_from
        while True:
            if self.resyncing:
                found = self._scanner(buf, pos)
                start, keep = found[0], found[1]
                if start is None:
                    self.skipped_bytes += keep - pos
                    pos = keep
                    # rescan once more bytes arrive (as many as the scanner said it needs)
                    self._need = max(end - pos + 1, found[2] if len(found) > 2 else 0)
                    break
                self.skipped_bytes += start - pos
                pos = start
                self.resyncing = False
                if self._opening:
                    self._opening = False
                    if self.skipped_bytes:
                        assert self._lead is not None  # feed() records an opening stream's first packet first
                        self.mid_start = MidStart(self._lead, self._date(pos + 4, frame), self.skipped_bytes)
                if self._bad is not None:
                    bad_frame, size, mark = self._bad
                    self._bad = None
                    at = frame if start >= end - fresh else self._first_frame
                    self.damage.append(Damage(bad_frame, size, at, self.skipped_bytes - mark))
            if end - pos < 4:
                self._need = 4
                break
            size = unpack(buf, pos)[0]
            if size < self._min or size > self._max:
                self._bad_size(frame if pos >= end - fresh else self._first_frame, size)
                self.skipped_bytes += 1
                pos += 1
                continue
            stop = pos + 4 + size
            if stop > end:
                self._need = stop - pos
                break
            if self._marks:
                out.append(Frame(buf[pos + 4 : stop], *self._dated(stop, frame, ts), size + 4))
            else:
                out.append(Frame(buf[pos + 4 : stop], frame, ts, size + 4))
            pos = stop
        self.frames += len(out)
        if self._marks:
            # Only a resync still under way needs dates; offsets move with the bytes consumed.
            self._marks = [(e - pos, f, t) for e, f, t in self._marks if e > pos] if self.resyncing else []
        rest = end - pos
        if rest:
            # Keep only the unconsumed tail (at most one partial frame), as its own piece.
            self._chunks = [bytes(buf[pos:])] if out or pos else [joined]
            if rest <= fresh:
                self._first_frame = frame
        else:
            self._chunks = []
        self._have = rest
        return out

    def _dated(self, stop: int, frame: int, ts: float) -> tuple[int, float]:
        """(frame, ts) of the packet that delivered buffer byte `stop - 1` (the current packet if unknown)."""
        for e, f, t in self._marks:
            if e >= stop:
                return f, t
        return frame, ts

    def _date(self, stop: int, frame: int) -> int:
        return self._dated(stop, frame, 0.0)[0]

    def _join(self) -> bytes:
        chunks = self._chunks
        if len(chunks) == 1:
            c = chunks[0]
            return c if isinstance(c, bytes) else bytes(c)
        joined = b"".join(chunks)
        self._chunks = [joined]
        return joined

    def _clear(self) -> None:
        self._marks = []
        self._chunks = []
        self._have = 0
        self._need = 4
