"""Frame builders: IPv4/IPv6 + TCP packets wrapped in every link layer the reader understands.

    ip = ip_packet(Endpoint("10.0.0.1", 40000), Endpoint("10.0.0.2", 9092), seq=1, ack=1, flags=PSH | ACK,
                   payload=b"...")
    frame = link_frame(LINKTYPE_ETHERNET, ip, vlans=[(0x8100, 7)])

Checksums: the IPv4 header checksum is filled in; the TCP checksum is left 0 (as offloading NICs leave it in
real captures) because computing it in Python would dominate the cost of writing 100 MB test captures.
"""

from __future__ import annotations

import functools
import ipaddress
import struct
from collections.abc import Callable, Sequence
from typing import Literal

from .events import ACK, Endpoint

__all__ = [
    "LINKTYPE_NULL", "LINKTYPE_ETHERNET", "LINKTYPE_RAW", "LINKTYPE_LOOP", "LINKTYPE_LINUX_SLL",
    "LINKTYPE_IPV4", "LINKTYPE_IPV6", "LINKTYPE_LINUX_SLL2",
    "ip_packet", "ethernet", "sll", "sll2", "raw", "null", "loop", "link_frame", "FRAMERS",
]

LINKTYPE_NULL, LINKTYPE_ETHERNET, LINKTYPE_RAW, LINKTYPE_LOOP = 0, 1, 101, 108
LINKTYPE_LINUX_SLL, LINKTYPE_IPV4, LINKTYPE_IPV6, LINKTYPE_LINUX_SLL2 = 113, 228, 229, 276

_IP4 = struct.Struct("!BBHHHBBH4s4s")
_IP6 = struct.Struct("!IHBB16s16s")
_TCP = struct.Struct("!HHIIBBHHH")
_SUM = struct.Struct("!10H")


@functools.lru_cache(maxsize=4096)
def _packed(ip: str) -> bytes:
    return ipaddress.ip_address(ip).packed


def _ipv4_checksum(header: bytes) -> int:
    total = sum(_SUM.unpack(header[:20]))
    for i in range(20, len(header), 2):
        total += header[i] << 8 | header[i + 1]
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ip_packet(
    src: Endpoint,
    dst: Endpoint,
    seq: int,
    ack: int = 0,
    flags: int = ACK,
    payload: bytes = b"",
    *,
    window: int = 65535,
    ttl: int = 64,
    ident: int = 0,
    fragment: int = 0,
    ip_options: bytes = b"",
    ipv6_ext: Sequence[int] = (),
    total_length: int | None = None,
    tcp_options: bytes = b"",
) -> bytes:
    """One IP packet carrying one TCP segment; IPv6 when the endpoints' addresses are IPv6.

    `fragment` is the IPv4 flags+offset field (0x2000 = more fragments). `ipv6_ext` lists extension header
    types to insert before TCP (0 hop-by-hop, 43 routing, 60 destination options, 44 fragment), each 8 bytes.
    `total_length` overrides the IP length field (0 = "unknown" as TSO/GSO loopback captures show it); by
    default it is computed, and set to 0 when the packet is too large for the 16-bit field.
    """
    tcp_options += b"\0" * (-len(tcp_options) % 4)
    tcp = _TCP.pack(src.port, dst.port, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, (5 + len(tcp_options) // 4) << 4,
                    flags, window, 0, 0) + tcp_options
    s, d = _packed(src.ip), _packed(dst.ip)
    if len(s) == 4:
        ip_options += b"\0" * (-len(ip_options) % 4)
        hl = 20 + len(ip_options)
        if total_length is None:
            total_length = hl + len(tcp) + len(payload)
            if total_length > 0xFFFF:
                total_length = 0
        header = _IP4.pack(0x40 | hl // 4, 0, total_length, ident, fragment, ttl, 6, 0, s, d) + ip_options
        header = header[:10] + struct.pack("!H", _ipv4_checksum(header)) + header[12:]
        return b"".join((header, tcp, payload))
    ext = b""
    nxt_chain = list(ipv6_ext) + [6]
    for i, kind in enumerate(ipv6_ext):
        nxt = nxt_chain[i + 1]
        if kind == 44:
            ext += bytes((nxt, 0, 0, 0, 0, 0, 0, 1))  # fragment header, offset 0, more fragments
        elif kind == 43:
            ext += bytes((nxt, 0, 0, 0, 0, 0, 0, 0))  # routing header, no segments left
        else:
            ext += bytes((nxt, 0, 1, 4, 0, 0, 0, 0))  # options header holding one PadN
    plen = len(ext) + len(tcp) + len(payload)
    if total_length is not None:
        plen = total_length
    elif plen > 0xFFFF:
        plen = 0
    first = nxt_chain[0]
    return b"".join((_IP6.pack(0x60000000, plen, first, ttl, s, d), ext, tcp, payload))


def ethernet(ip: bytes, *, vlans: Sequence[tuple[int, int]] = (), src_mac: bytes = b"\x02\0\0\0\0\x01",
             dst_mac: bytes = b"\x02\0\0\0\0\x02", pad: bool = False, fcs: bool = False) -> bytes:
    """Ethernet II; `vlans` are (TPID, VLAN id) tags outermost first, e.g. [(0x88a8, 10), (0x8100, 20)].

    `pad` pads short frames to the 60-byte minimum, `fcs` appends 4 FCS bytes: both as receive-side
    captures show them, and both must be trimmed by the IP length.
    """
    etype = 0x0800 if ip[0] >> 4 == 4 else 0x86DD
    tags = b"".join(struct.pack("!HH", tpid, vid & 0x0FFF) for tpid, vid in vlans)
    frame = b"".join((dst_mac, src_mac, tags, struct.pack("!H", etype), ip))
    if pad and len(frame) < 60:
        frame += b"\0" * (60 - len(frame))
    if fcs:
        frame += b"\xde\xad\xbe\xef"
    return frame


def sll(ip: bytes, *, packet_type: int = 0) -> bytes:
    """Linux cooked capture v1 (tcpdump -i any before libpcap 1.10)."""
    proto = 0x0800 if ip[0] >> 4 == 4 else 0x86DD
    return struct.pack("!HHH8sH", packet_type, 772, 6, b"\0" * 8, proto) + ip


def sll2(ip: bytes, *, packet_type: int = 0, ifindex: int = 1) -> bytes:
    """Linux cooked capture v2 (tcpdump -i any with libpcap >= 1.10)."""
    proto = 0x0800 if ip[0] >> 4 == 4 else 0x86DD
    return struct.pack("!HHIHBB8s", proto, 0, ifindex, 772, packet_type, 6, b"\0" * 8) + ip


def raw(ip: bytes) -> bytes:
    """Raw IP (link types 101, 12, 14, 228, 229): the frame is the IP packet."""
    return ip


def null(ip: bytes, *, byteorder: Literal["little", "big"] = "little", ipv6_family: int = 30) -> bytes:
    """BSD loopback: the address family in the capturing host's byte order (2 IPv4; 24/28/30 IPv6)."""
    family = 2 if ip[0] >> 4 == 4 else ipv6_family
    return family.to_bytes(4, byteorder) + ip


def loop(ip: bytes, *, ipv6_family: int = 24) -> bytes:
    """OpenBSD loopback (link type 108): the address family in network byte order."""
    family = 2 if ip[0] >> 4 == 4 else ipv6_family
    return family.to_bytes(4, "big") + ip


FRAMERS: dict[int, Callable[..., bytes]] = {
    LINKTYPE_NULL: null, LINKTYPE_ETHERNET: ethernet, 12: raw, 14: raw, LINKTYPE_RAW: raw,
    LINKTYPE_LOOP: loop, LINKTYPE_LINUX_SLL: sll, LINKTYPE_IPV4: raw, LINKTYPE_IPV6: raw,
    LINKTYPE_LINUX_SLL2: sll2,
}


def link_frame(linktype: int, ip: bytes, **options) -> bytes:
    """Wrap an IP packet in `linktype`'s header; `options` go to that link's builder (e.g. vlans=...)."""
    return FRAMERS[linktype](ip, **options)
