"""The bulk capture reader: pcap / pcapng (optionally gzip-compressed) records, fast.

This is the I/O edge of the capture layer. It walks packet records with precompiled
`struct.Struct.unpack_from` over an mmap (or over a streamed gzip window) and yields, per packet record:

    (frame, ts, linktype, interface, buf, offset, caplen, origlen)

`buf[offset:offset + caplen]` is the captured frame. `buf` is only valid until the next record is pulled
(the gzip window slides), so consumers slice what they keep. `frame` is the 1-based record number across the
file, Wireshark's numbering: every packet record counts, including ones a later stage skips. `interface` is a
small int unique per (section, interface) of the file so warnings can name it.

Damage is reported, not raised: a file cut mid-record yields every complete record and one counted warning.
Only a file that cannot be opened or is not a capture at all raises `CaptureError` (one line, naming the file).
"""

from __future__ import annotations

import mmap
import os
import struct
import zlib
from collections import Counter
from collections.abc import Generator, Iterator

__all__ = ["CaptureError", "unreadable_line", "Record", "read_records", "PCAP_MAGICS", "PCAPNG_SHB"]


class CaptureError(Exception):
    """A capture that cannot be read at all (missing, unreadable, not pcap/pcapng). The message is one line."""


def unreadable_line(exc: Exception, path=None) -> str:
    """The one line a file that could not be read is reported as, by both engines: a CaptureError's own (first)
    line; an OSError as `path: strerror` (its first line when no path is known)."""
    if path is not None and isinstance(exc, OSError):
        return f"{os.fspath(path)}: {exc.strerror or exc}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


Record = tuple[int, float, int, int, bytes | mmap.mmap, int, int, int]  # frame, ts, linktype, iface, buf, off, caplen, origlen

# Classic pcap magic as read little-endian -> (byte order prefix, timestamp fraction divisor).
PCAP_MAGICS = {
    0xA1B2C3D4: ("<", 1e-6),
    0xD4C3B2A1: (">", 1e-6),
    0xA1B23C4D: ("<", 1e-9),
    0x4D3CB2A1: (">", 1e-9),
}
PCAPNG_SHB = 0x0A0D0D0A
_BOM = 0x1A2B3C4D
_GZIP = b"\x1f\x8b"

_BT_IDB, _BT_PB, _BT_SPB, _BT_EPB = 1, 2, 3, 6
# The smallest block of each type that holds its fixed fields (header, fields, trailing length).
_MIN_BLOCK = {_BT_IDB: 20, _BT_PB: 32, _BT_SPB: 16, _BT_EPB: 32}
_BLOCK_NAMES = {_BT_IDB: "interface description", _BT_PB: "packet", _BT_SPB: "simple packet", _BT_EPB: "packet"}
_OPT_TSRESOL, _OPT_TSOFFSET = 9, 14

# No sane capture holds a single record this large; a bigger length means the file is corrupt here.
MAX_RECORD = 256 * 1024 * 1024
_CHUNK = 4 * 1024 * 1024
RELEASE_EVERY = 32 * 1024 * 1024  # hand mapped pages back this often, so RSS stays flat on a 1 GB capture


class _Window:
    """A readable window over the file. mmap: the whole file at once. gzip: a sliding decompressed window.

    `more(pos, need)` returns (buf, pos, end) with at least `need` bytes after pos when the file has them.
    """

    __slots__ = ("buf", "end", "damaged", "_stream", "_eof", "_mm", "_fh", "_released")

    def __init__(self, path: str):
        self._stream = None
        self._mm = None
        self._eof = False
        self._released = 0
        self.damaged = ""
        if os.path.isdir(path):
            raise CaptureError(f"{path}: is a directory, not a capture file")
        try:
            self._fh = open(path, "rb")
        except OSError as exc:
            raise CaptureError(f"{path}: cannot open: {exc.strerror or exc}") from None
        head = self._fh.read(2)
        self._fh.seek(0)
        self.buf: bytes | mmap.mmap = b""
        self.end = 0
        if head == _GZIP:
            self._stream = _Gunzip(self._fh)
            self.more(0, 64)
        elif os.fstat(self._fh.fileno()).st_size:
            self._mm = mmap.mmap(self._fh.fileno(), 0, access=mmap.ACCESS_READ)
            self.buf, self.end = self._mm, len(self._mm)
            if hasattr(mmap, "MADV_SEQUENTIAL"):
                self._mm.madvise(mmap.MADV_SEQUENTIAL)

    @property
    def compressed(self) -> bool:
        return self._stream is not None

    def more(self, pos: int, need: int):
        stream = self._stream
        if stream is None or self._eof:
            return self.buf, pos, self.end
        # Keep the unread tail, append decompressed chunks until `need` bytes are available or EOF.
        parts = [self.buf[pos:self.end]]
        have = self.end - pos
        while have < need:
            chunk = stream.read(max(_CHUNK, need - have))
            if not chunk:
                self._eof = True
                self.damaged = stream.damaged
                break
            parts.append(chunk)
            have += len(chunk)
        self.buf = b"".join(parts)
        self.end = len(self.buf)
        return self.buf, 0, self.end

    def release(self, pos: int) -> None:
        """Give back the mapped pages before `pos`: every page the walk touched would otherwise stay resident
        (a 1 GB capture, 1 GB of RSS). Safe for a read-only file mapping: a page touched again is re-read."""
        if self._mm is None or not hasattr(mmap, "MADV_DONTNEED"):
            return
        stop = pos - pos % mmap.PAGESIZE
        if stop > self._released:
            self._mm.madvise(mmap.MADV_DONTNEED, self._released, stop - self._released)
            self._released = stop

    def close(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        self._fh.close()


class _Gunzip:
    """Streaming gzip (all members) that keeps every byte decompressed before damage or a cut, unlike GzipFile,
    whose read() raises and drops the partial chunk."""

    def __init__(self, fh):
        self._fh = fh
        self._z = zlib.decompressobj(wbits=31)
        self._in_member = False  # fed input to the current member and not seen its end yet
        self._pending = b""  # input after a member's end: the next member
        self._done = False
        self.damaged = ""

    def read(self, n: int) -> bytes:
        out = []
        have = 0
        while have < n and not self._done:
            raw = self._z.unconsumed_tail or self._pending or self._fh.read(1 << 20)
            self._pending = b""
            try:
                if not raw:
                    out.append(self._z.flush())  # output zlib may still hold
                    if self._in_member:
                        self.damaged = "compressed stream cut short"
                    self._done = True
                    break
                self._in_member = True
                chunk = self._z.decompress(raw, n - have)
            except zlib.error as exc:
                self.damaged = str(exc)
                self._done = True
                break
            if self._z.eof:
                rest = self._z.unused_data
                self._z = zlib.decompressobj(wbits=31)
                self._in_member = False
                if rest.strip(b"\0"):  # trailing zero padding is not another member
                    self._pending = rest
            out.append(chunk)
            have += len(chunk)
        return b"".join(out)


def _describe_start(buf, end: int) -> str:
    head = bytes(buf[: min(end, 8)])
    text = "".join(chr(b) if 32 <= b < 127 else "." for b in head)
    return f"{head.hex(' ')} ({text!r})"


def read_records(path: str | os.PathLike, warnings: Counter | None = None) -> Generator[Record, None, None]:
    """Yield every packet record of a pcap/pcapng file (gzip-compressed or not); see the module docstring."""
    path = os.fspath(path)
    if warnings is None:
        warnings = Counter()
    win = _Window(path)
    try:
        buf, end = win.buf, win.end
        if end < 4:
            if end == 0:
                raise CaptureError(f"{path}: empty file, not a capture")
            raise CaptureError(f"{path}: not a pcap or pcapng capture (starts with {_describe_start(buf, end)})")
        magic = struct.unpack_from("<I", buf, 0)[0]
        if magic in PCAP_MAGICS:
            yield from _classic(win, path, magic, warnings)
        elif magic == PCAPNG_SHB:
            yield from _pcapng(win, path, warnings)
        else:
            what = "gzip-compressed file, not" if win.compressed else "not"
            raise CaptureError(f"{path}: {what} a pcap or pcapng capture (starts with {_describe_start(buf, end)})")
        if win.damaged:
            warnings[f"{os.path.basename(path)}: gzip stream damaged or cut short ({win.damaged})"] += 1
    finally:
        win.close()


def _truncated(warnings: Counter, path: str, frame: int, what: str) -> None:
    warnings[f"{os.path.basename(path)}: file cut mid-{what} after frame {frame}; later data ignored"] += 1


def _classic(win: _Window, path: str, magic: int, warnings: Counter) -> Iterator[Record]:
    order, div = PCAP_MAGICS[magic]
    buf, pos, end = win.more(0, 24)
    if end < 24:
        raise CaptureError(f"{path}: pcap file header is cut short ({end} of 24 bytes)")
    network = struct.unpack_from(order + "I", buf, 20)[0]
    # The top bits of the link-type field can carry FCS information (pcap-linktype(7)); the type is the low 28.
    linktype = network & 0x0FFFFFFF
    unpack = struct.Struct(order + "IIII").unpack_from
    pos += 24
    frame = 0
    more = win.more
    release_at = RELEASE_EVERY
    while True:
        if end - pos < 16:
            buf, pos, end = more(pos, 16)
            if end - pos < 16:
                if end > pos:
                    _truncated(warnings, path, frame, "record header")
                return
        sec, frac, incl, orig = unpack(buf, pos)
        if incl > MAX_RECORD:
            warnings[f"{os.path.basename(path)}: corrupt record after frame {frame} "
                     f"(length {incl}); later data ignored"] += 1
            return
        pos += 16
        if end - pos < incl:
            buf, pos, end = more(pos, incl)
            if end - pos < incl:
                _truncated(warnings, path, frame, "record")
                return
        frame += 1
        yield frame, sec + frac * div, linktype, 0, buf, pos, incl, orig
        pos += incl
        if pos >= release_at:
            win.release(pos)
            release_at = pos + RELEASE_EVERY


def _idb(buf, pos: int, blen: int, order: str) -> tuple[int, int, float, float]:
    """Interface Description Block -> (linktype, snaplen, ts divisor, ts offset in seconds)."""
    linktype, _res, snaplen = struct.unpack_from(order + "HHI", buf, pos + 8)
    divisor, offset = 1e6, 0.0
    opt, stop = pos + 16, pos + blen - 4
    opt_hdr = struct.Struct(order + "HH").unpack_from
    while opt + 4 <= stop:
        code, length = opt_hdr(buf, opt)
        value = opt + 4
        if code == 0 or value + length > stop:  # end of options, or one that runs past its block: damaged
            break
        if code == _OPT_TSRESOL and length >= 1:
            res = buf[value]
            # High bit set: a negative power of 2; otherwise a negative power of 10.
            divisor = float(2 ** (res & 0x7F)) if res & 0x80 else float(10 ** res)
        elif code == _OPT_TSOFFSET and length >= 8:
            offset = float(struct.unpack_from(order + "q", buf, value)[0])
        opt = value + ((length + 3) & ~3)
    return linktype & 0x0FFFFFFF, snaplen, divisor, offset


def _pcapng(win: _Window, path: str, warnings: Counter) -> Iterator[Record]:
    name = os.path.basename(path)
    buf, pos, end = win.more(0, 12)
    more = win.more
    frame = 0
    order = "<"
    block_hdr = struct.Struct("<II").unpack_from
    epb = struct.Struct("<IIIII").unpack_from
    u32 = struct.Struct("<I").unpack_from
    interfaces: list[tuple[int, int, float, float, int]] = []  # linktype, snaplen, divisor, offset, id
    next_iface = 0
    ts = 0.0  # a Simple Packet Block has no timestamp: it reuses the previous packet's
    release_at = RELEASE_EVERY
    while True:
        if end - pos < 12:
            buf, pos, end = more(pos, 12)
            if end - pos < 12:
                if end > pos:
                    _truncated(warnings, path, frame, "block header")
                return
        btype, blen = block_hdr(buf, pos)
        if btype == PCAPNG_SHB:
            # A new section: its own byte order (read the byte-order magic both ways) and its own interfaces.
            bom = u32(buf, pos + 8)[0]
            if bom == _BOM:
                order = "<"
            elif bom == 0x4D3C2B1A:
                order = ">"
            elif pos == 0:
                raise CaptureError(f"{path}: not a pcapng capture (bad byte-order magic {bom:#010x})")
            else:
                warnings[f"{name}: corrupt section header after frame {frame}; later data ignored"] += 1
                return
            block_hdr = struct.Struct(order + "II").unpack_from
            epb = struct.Struct(order + "IIIII").unpack_from
            u32 = struct.Struct(order + "I").unpack_from
            btype, blen = block_hdr(buf, pos)
            interfaces = []
        if blen < 12 or blen & 3 or blen > MAX_RECORD:
            warnings[f"{name}: corrupt block after frame {frame} (length {blen}); later data ignored"] += 1
            return
        if end - pos < blen:
            buf, pos, end = more(pos, blen)
            if end - pos < blen:
                _truncated(warnings, path, frame, "block")
                return
        if blen < _MIN_BLOCK.get(btype, 12):
            # Too short for its own fixed fields, which would be read from the next block or past the file's end:
            # skipped (an interface so declared is not declared). A packet block still counts as a frame, so
            # later frame numbers stay Wireshark's. One warning key per kind, however many such blocks.
            warnings[f"{name}: {_BLOCK_NAMES[btype]} blocks too short for their fields skipped"] += 1
            frame += btype != _BT_IDB
        elif btype == _BT_EPB:
            iface, hi, lo, caplen, origlen = epb(buf, pos + 8)
            frame += 1
            if caplen > blen - 32:
                warnings[f"{name}: frame {frame}: packet block shorter than its captured length"] += 1
                caplen = max(0, blen - 32)
            if iface < len(interfaces):
                lt, _snap, divisor, offset, ident = interfaces[iface]
                ts = ((hi << 32) | lo) / divisor + offset
                yield frame, ts, lt, ident, buf, pos + 28, caplen, origlen
            else:
                warnings[f"{name}: packets on undeclared interface {iface} skipped"] += 1
        elif btype == _BT_SPB:
            # Simple Packet Block: interface 0, no timestamp (reuse the previous packet's), captured length is
            # what fits in the block.
            origlen = u32(buf, pos + 8)[0]
            frame += 1
            caplen = min(origlen, blen - 16)
            if interfaces:
                lt, snap, _divisor, _offset, ident = interfaces[0]
                if snap:
                    caplen = min(caplen, snap)
                yield frame, ts, lt, ident, buf, pos + 12, caplen, origlen
            else:
                warnings[f"{name}: packets on undeclared interface 0 skipped"] += 1
        elif btype == _BT_IDB:
            lt, snap, divisor, offset = _idb(buf, pos, blen, order)
            interfaces.append((lt, snap, divisor, offset, next_iface))
            next_iface += 1
        elif btype == _BT_PB:
            # The obsolete Packet Block still counts as a frame in Wireshark; read it like an EPB.
            iface, _drops, hi, lo, caplen, origlen = struct.unpack_from(order + "HHIIII", buf, pos + 8)
            frame += 1
            caplen = min(caplen, max(0, blen - 32))
            if iface < len(interfaces):
                lt, _snap, divisor, offset, ident = interfaces[iface]
                ts = ((hi << 32) | lo) / divisor + offset
                yield frame, ts, lt, ident, buf, pos + 28, caplen, origlen
            else:
                warnings[f"{name}: packets on undeclared interface {iface} skipped"] += 1
        pos += blen
        if pos >= release_at:
            win.release(pos)
            release_at = pos + RELEASE_EVERY
