"""TcpConversation: write a whole TCP exchange between two endpoints into a capture writer.

    conv = TcpConversation(out, Endpoint("10.0.0.1", 40000), Endpoint("10.0.0.2", 9092))
    t = conv.handshake(ts=1700000000.0)                      # optional: leave it out for a mid-stream capture
    t = conv.send("client", request_bytes, t)                 # cut into segments, then the peer ACKs
    t = conv.send("server", response, t, drop={1})            # capture loss: segment 1 never written
    t = conv.close(t)                                        # FIN from both sides (or rst="server")

Knobs for the reassembler's hard cases: `drop`, `duplicate` (segment indices), `reorder` (a permutation, or
True to reverse), `overlap` (each segment also repeats the last N bytes of the one before). For anything else,
plan packets with `packets()` / `packet_at()`, arrange the list as you like, and `write()` it.
Timestamps are the caller's: every write takes `ts` and returns the next free timestamp (ts + step per packet).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from .events import ACK, FIN, PSH, RST, SYN, Endpoint
from .frames import ip_packet, link_frame

__all__ = ["TcpConversation", "Packet", "LOOPBACK_SEGMENT"]

LOOPBACK_SEGMENT = 65483  # the payload size TCP uses on Linux loopback (64 KiB MTU, timestamps option)
_M = 0xFFFFFFFF


@dataclass(frozen=True, slots=True)
class Packet:
    """A planned TCP segment, not yet written. `side` is "client" or "server" (the sender)."""

    side: str
    seq: int
    ack: int
    flags: int
    payload: bytes = b""


class TcpConversation:
    def __init__(self, writer, client: Endpoint, server: Endpoint, *, interface: int = 0,
                 segment_size: int = LOOPBACK_SEGMENT, client_isn: int = 1000, server_isn: int = 50000,
                 step: float = 1e-6, **link_options):
        """`writer` is a PcapWriter/PcapNgWriter; frames use the link type of `interface`; `link_options` go
        to the frame builder (e.g. vlans=[(0x8100, 5)]). ISNs may be anywhere in 32 bits (wrap is fine)."""
        self.writer = writer
        self.ends = {"client": client, "server": server}
        self.interface = interface
        self.linktype = writer.linktype(interface)
        self.segment_size = segment_size
        self.step = step
        self.link_options = link_options
        self.isn = {"client": client_isn & _M, "server": server_isn & _M}
        # Next sequence number each side sends; data starts at ISN + 1 (the SYN takes one).
        self.next = {"client": (client_isn + 1) & _M, "server": (server_isn + 1) & _M}

    @staticmethod
    def _peer(side: str) -> str:
        if side == "client":
            return "server"
        if side == "server":
            return "client"
        raise ValueError(f"side must be 'client' or 'server', not {side!r}")

    # -- planning ---------------------------------------------------------------------------------------------

    def packets(self, side: str, data: bytes, *, segment_size: int | None = None, overlap: int = 0,
                flags: int = PSH | ACK) -> list[Packet]:
        """Cut `data` into segments from `side` (advancing its sequence number); nothing is written yet."""
        size = segment_size or self.segment_size
        peer = self._peer(side)
        seq0, ack = self.next[side], self.next[peer]
        out = []
        view = memoryview(data)
        for start in range(0, len(data), size):
            begin = max(0, start - overlap) if start else 0
            out.append(Packet(side, (seq0 + begin) & _M, ack, flags, bytes(view[begin:start + size])))
        self.next[side] = (seq0 + len(data)) & _M
        return out

    def packet_at(self, side: str, offset: int, payload: bytes, flags: int = PSH | ACK) -> Packet:
        """A segment at stream `offset` of `side` (0 = first data byte): for retransmissions and overlaps."""
        return Packet(side, (self.isn[side] + 1 + offset) & _M, self.next[self._peer(side)], flags, payload)

    def control(self, side: str, flags: int) -> Packet:
        """A payload-less segment (pure ACK, FIN, RST) at `side`'s current sequence number."""
        return Packet(side, self.next[side], self.next[self._peer(side)], flags)

    # -- writing ----------------------------------------------------------------------------------------------

    def write(self, packets: Sequence[Packet], ts: float, *, snap: int | None = None) -> float:
        """Write planned packets in list order, `step` seconds apart; returns the next timestamp."""
        w, lt, opts, iface, step = self.writer, self.linktype, self.link_options, self.interface, self.step
        for p in packets:
            src = self.ends[p.side]
            dst = self.ends[self._peer(p.side)]
            ip = ip_packet(src, dst, p.seq, p.ack, p.flags, p.payload)
            w.write(link_frame(lt, ip, **opts) if opts else link_frame(lt, ip), ts, interface=iface, snap=snap)
            ts += step
        return ts

    def handshake(self, ts: float) -> float:
        c, s = self.isn["client"], self.isn["server"]
        return self.write([
            Packet("client", c, 0, SYN),
            Packet("server", s, (c + 1) & _M, SYN | ACK),
            Packet("client", (c + 1) & _M, (s + 1) & _M, ACK),
        ], ts)

    def send(self, side: str, data: bytes, ts: float, *, segment_size: int | None = None,
             drop: Collection[int] = (), duplicate: Collection[int] = (), reorder: Sequence[int] | bool = (),
             overlap: int = 0, ack: bool = True, snap: int | None = None) -> float:
        """Send `data` from `side` in segments, then (if `ack`) the peer ACKs everything.

        `drop`/`duplicate` name segment indices; `reorder` is a permutation of indices (True: reverse).
        The peer's ACK covers dropped segments too: it is the evidence that the capture, not the network,
        lost them. Returns the next timestamp.
        """
        plan = self.packets(side, data, segment_size=segment_size, overlap=overlap)
        order = list(range(len(plan)))
        if reorder is True:
            order.reverse()
        elif reorder:
            order = list(reorder)
        chosen = []
        for i in order:
            if i in drop:
                continue
            chosen.append(plan[i])
            if i in duplicate:
                chosen.append(plan[i])
        ts = self.write(chosen, ts, snap=snap)
        if ack:
            ts = self.ack(self._peer(side), ts)
        return ts

    def ack(self, side: str, ts: float) -> float:
        """`side` sends a pure ACK for everything its peer has sent."""
        return self.write([self.control(side, ACK)], ts)

    def fin(self, side: str, ts: float) -> float:
        """`side` sends FIN (the FIN takes one sequence number)."""
        ts = self.write([self.control(side, FIN | ACK)], ts)
        self.next[side] = (self.next[side] + 1) & _M
        return ts

    def rst(self, side: str, ts: float) -> float:
        return self.write([self.control(side, RST | ACK)], ts)

    def close(self, ts: float, *, first: str = "client", rst: str | None = None) -> float:
        """FIN from `first`, FIN from the other, last ACK; or a single RST from side `rst`."""
        if rst:
            return self.rst(rst, ts)
        ts = self.fin(first, ts)
        ts = self.fin(self._peer(first), ts)
        return self.ack(first, ts)
