"""Link layers down to IP, and IP down to TCP: where in a captured frame the TCP segment is.

Two steps, both plain functions over (buf, offset, end) so the hot loop makes no objects:

- `link_decoder(linktype)` -> a function `(buf, off, end) -> ip_offset` (or -1 when the frame is not IPv4/IPv6),
  or None for a link type we do not read.
- `parse_tcp(buf, ip, end, wire_end)` -> a `TcpFields` tuple, or one of the int codes NOT_TCP, FRAGMENT,
  MALFORMED, HEADER_CUT when there is no usable TCP segment.

`end` is where the captured bytes stop; `wire_end` where the frame stopped on the wire (offset + original
length). The IP length decides where the payload ends (so Ethernet padding and FCS are trimmed); bytes the IP
header claims but the snaplen cut are reported as `truncated` so reassembly sees them as a gap.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

__all__ = [
    "LINKTYPE_NAMES", "link_decoder", "link_name", "parse_tcp",
    "NOT_TCP", "FRAGMENT", "MALFORMED", "HEADER_CUT",
]

# Link types as pcap/pcapng files number them (https://www.tcpdump.org/linktypes.html).
LINKTYPE_NAMES = {
    0: "NULL (BSD loopback)", 1: "ETHERNET", 12: "RAW", 14: "RAW", 101: "RAW", 108: "LOOP",
    113: "LINUX_SLL", 228: "IPV4", 229: "IPV6", 276: "LINUX_SLL2",
}
_OTHER_NAMES = {
    105: "IEEE802_11", 127: "IEEE802_11_RADIOTAP", 147: "USER0", 192: "PPI", 9: "PPP",
    50: "PPP_HDLC", 104: "C_HDLC", 220: "USB_LINUX_MMAPPED", 249: "NETLINK", 263: "DSA_TAG",
}

# Results of parse_tcp when there is no segment (ints, so the caller tests `type(r) is int` cheaply).
NOT_TCP, FRAGMENT, MALFORMED, HEADER_CUT = 1, 2, 3, 4

_VLAN = (0x8100, 0x88A8, 0x9100)  # 802.1Q, 802.1ad, and the old QinQ outer tag
_IP_TYPES = (0x0800, 0x86DD)
_AF_INET = 2
_AF_INET6 = (10, 24, 28, 30)  # Linux, NetBSD/OpenBSD, FreeBSD, Darwin
_IP4 = struct.Struct("!BBHHHBB")
_TCP = struct.Struct("!HHIIBB")
_H = struct.Struct("!H")

LinkDecoder = Callable[[object, int, int], int]
TcpFields = tuple[bytes, int, int, int, int, int, int, int, int]
# (addrs: src+dst address bytes, sport, dport, seq, ack, flags, payload_start, payload_end, truncated)


def link_name(linktype: int) -> str:
    return LINKTYPE_NAMES.get(linktype) or _OTHER_NAMES.get(linktype) or "unknown"


def _ethernet(buf, off: int, end: int) -> int:
    if end - off < 14:
        return -1
    etype = buf[off + 12] << 8 | buf[off + 13]
    off += 14
    while etype in _VLAN:
        if end - off < 4:
            return -1
        etype = buf[off + 2] << 8 | buf[off + 3]
        off += 4
    return off if etype in _IP_TYPES else -1


def _sll(buf, off: int, end: int) -> int:
    # Linux cooked v1: packet type, ARPHRD, address length, 8 address bytes, protocol (16 bytes).
    if end - off < 16:
        return -1
    return off + 16 if (buf[off + 14] << 8 | buf[off + 15]) in _IP_TYPES else -1


def _sll2(buf, off: int, end: int) -> int:
    # Linux cooked v2 (tcpdump -i any since libpcap 1.10): protocol first, 20-byte header.
    if end - off < 20:
        return -1
    return off + 20 if (buf[off] << 8 | buf[off + 1]) in _IP_TYPES else -1


def _raw(buf, off: int, end: int) -> int:
    return off if end > off else -1


def _null(buf, off: int, end: int) -> int:
    # BSD loopback: the address family in the *capturing host's* byte order; accept either.
    if end - off < 4:
        return -1
    af = buf[off] | buf[off + 1] << 8 | buf[off + 2] << 16 | buf[off + 3] << 24
    if af > 0xFFFF:
        af = buf[off + 3] | buf[off + 2] << 8
    return off + 4 if af == _AF_INET or af in _AF_INET6 else -1


def _loop(buf, off: int, end: int) -> int:
    # OpenBSD loopback: like NULL but always network byte order.
    if end - off < 4:
        return -1
    af = buf[off + 2] << 8 | buf[off + 3]
    return off + 4 if buf[off] == 0 and buf[off + 1] == 0 and (af == _AF_INET or af in _AF_INET6) else -1


_DECODERS: dict[int, LinkDecoder] = {
    0: _null, 1: _ethernet, 12: _raw, 14: _raw, 101: _raw, 108: _loop, 113: _sll, 228: _raw, 229: _raw,
    276: _sll2,
}


def link_decoder(linktype: int) -> LinkDecoder | None:
    return _DECODERS.get(linktype)


def parse_tcp(buf, ip: int, end: int, wire_end: int) -> TcpFields | int:
    """Walk IPv4 (with options) or IPv6 (skipping extension headers) to the TCP header and payload."""
    if end - ip < 20:
        return MALFORMED
    b0 = buf[ip]
    version = b0 >> 4
    if version == 4:
        _b0, _tos, total, _ident, frag, _ttl, proto = _IP4.unpack_from(buf, ip)
        if proto != 6:
            return NOT_TCP
        if frag & 0x3FFF:  # more-fragments flag or a fragment offset
            return FRAGMENT
        ihl = (b0 & 15) * 4
        # Total length 0: TSO/GSO on loopback hands the capture a segment larger than the field can say.
        claimed = ip + total if total else wire_end
        if ihl < 20 or (total and total < ihl + 20):
            return MALFORMED
        addrs = buf[ip + 12:ip + 20]
        t = ip + ihl
    elif version == 6:
        if end - ip < 40:
            return MALFORMED
        plen = _H.unpack_from(buf, ip + 4)[0]
        nxt = buf[ip + 6]
        addrs = buf[ip + 8:ip + 40]
        claimed = ip + 40 + plen if plen else wire_end  # 0: a jumbogram or GSO, the rest of the frame
        t = ip + 40
        while nxt != 6:
            if t + 8 > end:
                return MALFORMED if claimed <= end else HEADER_CUT
            if nxt == 0 or nxt == 43 or nxt == 60:  # hop-by-hop, routing, destination options
                nxt, t = buf[t], t + (buf[t + 1] + 1) * 8
            elif nxt == 51:  # authentication header counts 4-byte units
                nxt, t = buf[t], t + (buf[t + 1] + 2) * 4
            elif nxt == 44:
                return FRAGMENT
            else:
                return NOT_TCP
    else:
        return MALFORMED
    if claimed > wire_end:  # the IP header claims more than the wire carried: trust the wire
        claimed = wire_end
    stop = claimed if claimed < end else end
    if t + 20 > stop:
        return HEADER_CUT if claimed > end else MALFORMED
    sport, dport, seq, ack, doff, flags = _TCP.unpack_from(buf, t)
    pay = t + (doff >> 4) * 4
    if doff < 0x50:
        return MALFORMED
    if pay > stop:
        return HEADER_CUT if claimed > end else MALFORMED
    return addrs, sport, dport, seq, ack, flags, pay, stop, claimed - stop
