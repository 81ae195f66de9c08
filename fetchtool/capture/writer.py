"""Capture writers for tests, generators, benchmarks and synthetic scenarios: classic pcap and pcapng.

    with PcapWriter(path, LINKTYPE_ETHERNET, nanosecond=True) as out:
        out.write(frame_bytes, ts=1700000000.25)

    with PcapNgWriter(path, compress=True) as out:          # path.pcapng.gz style: gzip on the fly
        lo = out.add_interface(LINKTYPE_LINUX_SLL2, tsresol=9)
        eth = out.add_interface(LINKTYPE_ETHERNET, tsresol=20, base2=True)
        out.write(frame, ts, interface=eth)
        out.write_simple(frame)                              # SPB: interface 0, no timestamp
        out.new_section(byteorder="big")                     # interfaces restart in each section

Both writers share `write(frame, ts, *, interface=0, orig_len=None, snap=None)`: `snap` cuts the stored frame
as a snaplen would (the original length stays `len(frame)`); `orig_len` overrides the original length.
Frames of any size are written whole (pcapng has no 65,535 limit; nor does this classic writer).
`TcpConversation` (re-exported here from .conversation) writes whole TCP exchanges through either writer; the
frame builders of .frames are re-exported too.
"""

from __future__ import annotations

import gzip
import os
import struct
from typing import BinaryIO

from .frames import *  # noqa: F401,F403  (re-exported: one import for writers and frame builders)
from .frames import LINKTYPE_ETHERNET

__all__ = ["PcapWriter", "PcapNgWriter", "TcpConversation"]


def _open(path, compress: bool) -> BinaryIO | gzip.GzipFile:
    if hasattr(path, "write"):
        return gzip.GzipFile(fileobj=path, mode="wb", compresslevel=1) if compress else path
    if compress:
        return gzip.open(os.fspath(path), "wb", compresslevel=1)
    return open(os.fspath(path), "wb", buffering=1 << 20)


def _order(byteorder: str) -> str:
    if byteorder not in ("little", "big"):
        raise ValueError(f"byteorder must be 'little' or 'big', not {byteorder!r}")
    return "<" if byteorder == "little" else ">"


class _Writer:
    def __init__(self, path, compress: bool):
        self._owns = not hasattr(path, "write") or compress
        self._out = _open(path, compress)
        self.frames = 0  # packet records written so far (= the last frame number)

    def linktype(self, interface: int = 0) -> int:
        raise NotImplementedError

    def close(self) -> None:
        if self._owns:
            self._out.close()
        else:
            self._out.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class PcapWriter(_Writer):
    """Classic pcap: one link type; byte order and microsecond/nanosecond timestamps are choices."""

    def __init__(self, path, linktype: int = LINKTYPE_ETHERNET, *, nanosecond: bool = False,
                 byteorder: str = "little", snaplen: int = 262144, compress: bool = False):
        super().__init__(path, compress)
        order = _order(byteorder)
        self._linktype = linktype
        self._res = 1_000_000_000 if nanosecond else 1_000_000
        self._rec = struct.Struct(order + "IIII")
        magic = 0xA1B23C4D if nanosecond else 0xA1B2C3D4
        self._out.write(struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype))

    def linktype(self, interface: int = 0) -> int:
        return self._linktype

    def write(self, frame: bytes, ts: float, *, interface: int = 0, orig_len: int | None = None,
              snap: int | None = None) -> int:
        """Write one packet record; returns its frame number."""
        if interface != 0:
            raise ValueError("classic pcap has a single interface (0)")
        wire = len(frame) if orig_len is None else orig_len
        if snap is not None and len(frame) > snap:
            frame = frame[:snap]
        sec = int(ts)
        frac = round((ts - sec) * self._res)
        if frac >= self._res:
            sec, frac = sec + 1, frac - self._res
        self._out.write(self._rec.pack(sec, frac, len(frame), wire))
        self._out.write(frame)
        self.frames += 1
        return self.frames


class PcapNgWriter(_Writer):
    """pcapng: sections, interfaces (each with its link type and timestamp resolution), EPB and SPB."""

    def __init__(self, path, *, byteorder: str = "little", compress: bool = False):
        super().__init__(path, compress)
        self._interfaces: list[tuple[int, int, int, int]] = []  # linktype, units/s, snaplen, tsoffset
        self._start_section(byteorder)

    def _start_section(self, byteorder: str) -> None:
        self._o = order = _order(byteorder)
        self._interfaces = []
        self._epb = struct.Struct(order + "IIIIIII")
        body = struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1)
        self.write_block(0x0A0D0D0A, body)

    def new_section(self, byteorder: str = "little") -> None:
        """Start another section (Section Header Block); its interfaces are numbered from 0 again."""
        self._start_section(byteorder)

    def add_interface(self, linktype: int, *, tsresol: int = 6, base2: bool = False, snaplen: int = 0,
                      name: str | None = None, tsoffset: int = 0) -> int:
        """Declare an interface (IDB); timestamps count 10**-tsresol s (or 2**-tsresol s when base2)."""
        o = self._o
        opts = b""
        if name:
            raw = name.encode()
            opts += struct.pack(o + "HH", 2, len(raw)) + raw + b"\0" * (-len(raw) % 4)
        if tsresol != 6 or base2:
            opts += struct.pack(o + "HHB3x", 9, 1, (0x80 | tsresol) if base2 else tsresol)
        if tsoffset:
            opts += struct.pack(o + "HHq", 14, 8, tsoffset)
        if opts:
            opts += struct.pack(o + "HH", 0, 0)
        self.write_block(1, struct.pack(o + "HHI", linktype, 0, snaplen) + opts)
        self._interfaces.append((linktype, 2 ** tsresol if base2 else 10 ** tsresol, snaplen, tsoffset))
        return len(self._interfaces) - 1

    def linktype(self, interface: int = 0) -> int:
        return self._interfaces[interface][0]

    def write(self, frame: bytes, ts: float, *, interface: int = 0, orig_len: int | None = None,
              snap: int | None = None) -> int:
        """Write an Enhanced Packet Block; returns its frame number."""
        if not self._interfaces:
            raise ValueError("add_interface() before writing packets")
        _lt, units, _snaplen, tsoffset = self._interfaces[interface]
        wire = len(frame) if orig_len is None else orig_len
        if snap is not None and len(frame) > snap:
            frame = frame[:snap]
        t = ts - tsoffset
        sec = int(t)
        stamp = sec * units + round((t - sec) * units)
        pad = -len(frame) % 4
        total = 32 + len(frame) + pad
        out = self._out
        out.write(self._epb.pack(6, total, interface, stamp >> 32, stamp & 0xFFFFFFFF, len(frame), wire))
        out.write(frame)
        out.write(b"\0" * pad + struct.pack(self._o + "I", total))
        self.frames += 1
        return self.frames

    def write_simple(self, frame: bytes, *, orig_len: int | None = None) -> int:
        """Write a Simple Packet Block (interface 0, no timestamp); returns its frame number."""
        if not self._interfaces:
            raise ValueError("add_interface() before writing packets")
        wire = len(frame) if orig_len is None else orig_len
        self.write_block(3, struct.pack(self._o + "I", wire) + frame)
        self.frames += 1
        return self.frames

    def write_block(self, block_type: int, body: bytes) -> None:
        """Write any block (padded to 4 bytes): e.g. a Name Resolution or custom block readers must skip."""
        pad = -len(body) % 4
        total = 12 + len(body) + pad
        o = self._o
        self._out.write(b"".join((struct.pack(o + "II", block_type, total), body, b"\0" * pad,
                                  struct.pack(o + "I", total))))


from .conversation import TcpConversation  # noqa: E402  (re-export; conversation imports nothing from here)
