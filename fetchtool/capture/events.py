"""What the capture layer hands to the Kafka layer: TCP segments in, ordered stream events out.

These are the contract between `capture/` (reader, link layers, reassembly) and `protocol/` (framing,
pairing). Every event is a frozen dataclass; frame numbers are Wireshark's (1-based record number in the file).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

# TCP flag bits as in the TCP header's flags byte.
FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10


class Endpoint(NamedTuple):
    # A value, not an event: a NamedTuple so that hashing it (reassembly does, twice per packet) runs in C.
    ip: str  # dotted IPv4 or compressed IPv6 (ipaddress module's str())
    port: int

    def __str__(self) -> str:
        # "ip:port" as the JSON contracts use it; IPv6 in brackets so the port stays unambiguous.
        return f"[{self.ip}]:{self.port}" if ":" in self.ip else f"{self.ip}:{self.port}"


@dataclass(frozen=True, slots=True)
class Segment:
    """One TCP segment as captured."""

    frame: int
    ts: float  # epoch seconds
    src: Endpoint
    dst: Endpoint
    seq: int
    flags: int
    payload: bytes
    # Added by the capture layer (defaults keep older callers working):
    ack: int = 0  # acknowledgment number (meaningful when flags has ACK): the peer's evidence of lost bytes
    truncated: int = 0  # payload bytes the snaplen cut off right after `payload` (they are a known gap)
    at: int = -1  # file offset of `payload` in a memory-mapped capture (-1: not mapped), so that another
    #               process reading the same file can be told where the bytes are instead of sent them


@dataclass(frozen=True, slots=True)
class StreamData:
    """Bytes delivered in order on one direction of one connection.

    `frame`/`ts` are those of the packet whose arrival made these bytes contiguous (so the packet that
    completes a Kafka message is the frame of the StreamData holding its last byte).
    """

    conn: int  # unique per connection instance (a SYN on a reused 4-tuple starts a new one)
    src: Endpoint
    dst: Endpoint
    data: bytes
    frame: int
    ts: float


@dataclass(frozen=True, slots=True)
class StreamGap:
    """Bytes lost on one direction (never captured); the stream continues after them."""

    conn: int
    src: Endpoint
    dst: Endpoint
    lost_bytes: int
    frame: int
    ts: float


@dataclass(frozen=True, slots=True)
class ConnectionClosed:
    """A connection ended (FIN from both sides, RST, a new SYN on the same 4-tuple, or end of capture)."""

    conn: int
    reason: str  # "fin" | "rst" | "reused" | "end_of_capture"
    frame: int
    ts: float


@dataclass(frozen=True, slots=True)
class StreamRun:
    """Consecutive StreamData events of one direction of one connection, handed on as one (the forked reader's
    batches, when the consumer asks for runs: streams.stream_set_events(runs=True)). Piece i holds the bytes
    packet frames[i] (at tss[i]) delivered; ends[i] is the pieces' running length up to and including it.
    A consumer that cannot take a whole run at once takes its events() one by one: nothing is lost."""

    conn: int
    src: Endpoint
    dst: Endpoint
    pieces: list  # bytes-like, none empty
    frames: list[int]
    tss: list[float]
    ends: list[int]

    def event(self, i: int) -> StreamData:
        return StreamData(self.conn, self.src, self.dst, self.pieces[i], self.frames[i], self.tss[i])

    def events(self) -> list[StreamData]:
        return [self.event(i) for i in range(len(self.pieces))]


StreamEvent = StreamData | StreamGap | ConnectionClosed
