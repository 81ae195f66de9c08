"""Cut a real capture so that it begins where a capture started late would: drop its first packets, and
optionally the first bytes of the first kept packet's TCP payload (a capture that began inside a segment's
message, as after a snaplen-free ring buffer overwrote the start). Written with fetchtool's own pcap writer;
classic pcap, Ethernet + IPv4 only (what the real captures in captures/kafka are)."""

from __future__ import annotations

from struct import Struct

from fetchtool.capture.reader import read_records
from fetchtool.capture.writer import PcapWriter

_ETH = 14
_H = Struct("!H")
_I = Struct("!I")


def cut_capture(src, dst, first_frame: int, trim: int = 0) -> int:
    """Write `src` from record `first_frame` on to `dst`; `trim` payload bytes come off that record's
    front (its sequence number moves on by as many). Returns the frame offset: old frame = new frame + offset."""
    with PcapWriter(dst, nanosecond=True) as out:
        for frame, ts, linktype, _iface, buf, off, caplen, _orig in read_records(src):
            if frame < first_frame:
                continue
            assert linktype == 1, "Ethernet captures only"
            data = bytes(buf[off:off + caplen])
            if frame == first_frame and trim:
                data = _trim_payload(data, trim)
            out.write(data, ts)
    return first_frame - 1


def _trim_payload(data: bytes, n: int) -> bytes:
    ip = _ETH
    ihl = (data[ip] & 15) * 4
    tcp = ip + ihl
    pay = tcp + (data[tcp + 12] >> 4) * 4
    assert len(data) - pay > n, "the packet must keep some payload"
    out = bytearray(data[:pay] + data[pay + n:])
    _H.pack_into(out, ip + 2, _H.unpack_from(out, ip + 2)[0] - n)
    _I.pack_into(out, tcp + 4, (_I.unpack_from(out, tcp + 4)[0] + n) & 0xFFFFFFFF)
    return bytes(out)
