"""TCP segments out of a capture file: reader -> link layer -> IP -> TCP -> `events.Segment`.

    stats = CaptureStats()
    for segment in iter_segments("broker.pcapng", stats):
        ...
    print(stats.warnings)  # Counter of one-line warnings, e.g. "truncated packet (cut by the snaplen)": 12

Only TCP makes it out; everything else is counted. Endpoint objects are made once per (addresses, ports) and
reused, so the per-packet cost is header unpacking plus one dict lookup (the design's ~2 us/packet budget).
"""

from __future__ import annotations

import ipaddress
import mmap
import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal

from .._fast import fast_constructor
from .events import Endpoint, Segment
from .links import FRAGMENT, HEADER_CUT, MALFORMED, NOT_TCP, LinkDecoder, link_decoder, link_name, parse_tcp
from .reader import CaptureError, read_records

__all__ = ["CaptureStats", "iter_segments", "CaptureError"]

_segment = fast_constructor(Segment)

W_FRAGMENT = "IP fragment skipped (fragments are not reassembled)"
W_TRUNCATED = "truncated packet (cut by the snaplen; the missing bytes are a gap)"
W_HEADER_CUT = "packet cut inside its IP/TCP headers by the snaplen (skipped)"
W_MALFORMED = "malformed IP/TCP header (packet skipped)"


@dataclass
class CaptureStats:
    """What the capture layer read; one instance can accumulate over several files."""

    files: int = 0
    packets: int = 0  # packet records read (every frame number)
    bytes: int = 0  # captured bytes of those records
    tcp_segments: int = 0
    skipped_non_tcp: int = 0  # not IP, or IP but not TCP
    warnings: Counter = field(default_factory=Counter)  # one-line warning text -> count

    def merge(self, other: CaptureStats) -> None:
        """Add another reading's counts (the forked reader's, or another file's)."""
        self.files += other.files
        self.packets += other.packets
        self.bytes += other.bytes
        self.tcp_segments += other.tcp_segments
        self.skipped_non_tcp += other.skipped_non_tcp
        self.warnings.update(other.warnings)

    @property
    def decoded_any(self) -> bool:
        """Whether any packet was decoded down to TCP or recognised as other traffic (frames all of an
        unsupported link type, or a corrupt first record, give none)."""
        return bool(self.tcp_segments or self.skipped_non_tcp)

    @property
    def gave_nothing(self) -> bool:
        """A damaged file: packets or damage warnings, but no packet decoded. (A clean capture with no packets
        is read: it is empty.)"""
        return not self.decoded_any and bool(self.packets or self.warnings)

    def nothing_read(self, label: str) -> str:
        """The one-line error for a file that gave nothing, from its first warning."""
        damage = next(iter(self.warnings), "no packet could be decoded").removeprefix(f"{label}: ")
        return f"{label}: nothing could be read: {damage}"


FlowFilter = Callable[[bytes, int, int], bool]
# (addrs: src+dst address bytes as parse_tcp gives them, sport, dport) -> keep this direction's segments?


def iter_segments(path: str | os.PathLike, stats: CaptureStats | None = None,
                  frame_offset: int = 0, keep_flow: FlowFilter | None = None) -> Iterator[Segment]:
    """Yield every TCP segment of one capture file, in file order, with Wireshark frame numbers (plus
    `frame_offset`: a later file of a rotated set numbers on from the packets of the files before it).

    `keep_flow`, when given, is asked once per direction of each flow, from the raw header fields, whether its
    segments are wanted: the others are counted in `stats` (as every packet is) but no Segment is made for them,
    so a reader that wants a few flows of a big capture pays only the header walk for the rest (the Spark
    engine's flow buckets)."""
    if stats is None:
        stats = CaptureStats()
    stats.files += 1
    warnings = stats.warnings
    name = os.path.basename(os.fspath(path))
    decoders: dict[int, LinkDecoder | Literal[False]] = {}  # interface id -> link decoder (False: unsupported)
    # (addrs, sport, dport) -> endpoints; () for a direction keep_flow declined
    flows: dict[tuple[bytes, int, int], tuple[Endpoint, Endpoint] | tuple[()]] = {}
    endpoints: dict[tuple[bytes, int], Endpoint] = {}
    hosts: dict[bytes, str] = {}  # address bytes -> text, once per host (not per port: a storm's 100,000)
    unsupported: dict[int, int] = {}  # interface id -> link type
    packets = nbytes = segments = non_tcp = usable = 0
    try:
        for frame, ts, linktype, iface, buf, off, caplen, origlen in read_records(path, warnings):
            packets += 1
            nbytes += caplen
            decode = decoders.get(iface)
            if decode is None:
                decode = decoders[iface] = link_decoder(linktype) or False
                if decode is False:
                    unsupported[iface] = linktype
            if decode is False:
                warnings[f"{name}: unsupported link type {linktype} ({link_name(linktype)}) on interface "
                         f"{iface}: its packets are skipped"] += 1
                continue
            usable += 1
            end = off + caplen
            ip = decode(buf, off, end)
            if ip < 0:
                non_tcp += 1
                continue
            r = parse_tcp(buf, ip, end, off + origlen)
            if isinstance(r, int):
                if r == NOT_TCP:
                    non_tcp += 1
                elif r == FRAGMENT:
                    warnings[W_FRAGMENT] += 1
                elif r == HEADER_CUT:
                    warnings[W_HEADER_CUT] += 1
                elif r == MALFORMED:
                    warnings[W_MALFORMED] += 1
                continue
            addrs, sport, dport, seq, ack, flags, pay, stop, truncated = r
            key = (addrs, sport, dport)
            pair = flows.get(key)
            if pair is None:
                pair = flows[key] = (_endpoints(endpoints, hosts, addrs, sport, dport)
                                     if keep_flow is None or keep_flow(addrs, sport, dport) else ())
            if truncated:
                warnings[W_TRUNCATED] += 1
            segments += 1
            if not pair:
                continue
            yield _segment(frame + frame_offset, ts, pair[0], pair[1], seq, flags, buf[pay:stop], ack, truncated,
                           pay if type(buf) is mmap.mmap else -1)
    finally:
        stats.packets += packets
        stats.bytes += nbytes
        stats.tcp_segments += segments
        stats.skipped_non_tcp += non_tcp
    if packets and not usable:
        types = ", ".join(f"{lt} ({link_name(lt)})" for lt in sorted(set(unsupported.values())))
        raise CaptureError(f"{path}: nothing could be read: unsupported link type {types}")


def _endpoints(cache: dict, hosts: dict, addrs: bytes, sport: int, dport: int) -> tuple[Endpoint, Endpoint]:
    half = len(addrs) // 2
    return _endpoint(cache, hosts, addrs[:half], sport), _endpoint(cache, hosts, addrs[half:], dport)


def _endpoint(cache: dict, hosts: dict, addr: bytes, port: int) -> Endpoint:
    ep = cache.get((addr, port))
    if ep is None:
        ip = hosts.get(addr)
        if ip is None:
            ip = hosts[addr] = str(ipaddress.ip_address(addr))
        ep = cache[(addr, port)] = Endpoint(ip, port)
    return ep
