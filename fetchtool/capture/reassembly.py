"""Sans-IO TCP reassembly: `Segment`s in, ordered `StreamData` / `StreamGap` / `ConnectionClosed` out.

    r = TcpReassembler()
    for seg in iter_segments(path):
        for event in r.feed(seg):
            ...
    events = r.finish(last_frame, last_ts)   # closes what is left with reason "end_of_capture"

Per direction, positions are relative offsets from the first sequence number seen (the SYN's + 1, or the first
segment of a capture that starts mid-connection), so 32-bit wrap is invisible. The first copy of a byte wins:
retransmissions and overlaps are trimmed. Out-of-order data waits in a small interval list until the hole
before it is filled (the released bytes carry the filler's frame) or declared lost:
- the peer acknowledged beyond the hole (the receiver got bytes the capture never saw),
- more than `max_buffered` bytes wait behind it,
- the connection ends (FIN from both sides, RST, port reuse, end of capture).
In-order segments with nothing buffered take a short path: their payload object is handed on as is.
"""

from __future__ import annotations

from bisect import bisect_left

from .._fast import fast_constructor
from .events import ACK, FIN, RST, SYN, ConnectionClosed, Endpoint, Segment, StreamData, StreamEvent, StreamGap

__all__ = ["TcpReassembler"]

_M = 0xFFFFFFFF
_stream_data = fast_constructor(StreamData)
_segment = fast_constructor(Segment)
_connection_closed = fast_constructor(ConnectionClosed)  # (these two once per connection: a storm's 100,000)
_HALF = 0x80000000


def _delta(seq: int, ref: int) -> int:
    """Signed distance from sequence number `ref` to `seq` in 32-bit sequence space."""
    return ((seq - ref + _HALF) & _M) - _HALF


class _Conn:
    __slots__ = ("id", "halves")

    def __init__(self, conn_id: int):
        self.id = conn_id
        self.halves: list[_Half] = []


class _Half:
    """One direction of one connection."""

    __slots__ = ("conn", "src", "dst", "peer", "started", "isn", "base", "next_abs", "next_off", "ooo",
                 "ooo_bytes", "fin_off", "last_ack", "has_ack")

    def __init__(self, conn: _Conn, src: Endpoint, dst: Endpoint):
        self.conn, self.src, self.dst = conn, src, dst
        self.peer: _Half = self
        self.started = False
        self.isn: int | None = None  # the SYN's sequence number, when seen
        self.base = 0  # absolute sequence number of offset 0
        self.next_abs = 0  # absolute sequence number of the next byte to deliver
        self.next_off = 0  # relative offset of the next byte to deliver
        # Waiting out-of-order data: sorted, non-overlapping (start, end, bytes | None); None marks bytes known
        # lost (cut by the snaplen).
        self.ooo: list[tuple[int, int, bytes | None]] = []
        self.ooo_bytes = 0
        self.fin_off: int | None = None
        self.last_ack = 0  # the latest ACK number the peer sent for this direction
        self.has_ack = False

    def start(self, first_byte: int) -> None:
        self.started = True
        self.base = self.next_abs = first_byte & _M
        self.next_off = 0

    def ack_offset(self) -> int | None:
        """Relative offset the peer acknowledged (capped at our FIN), or None when there is no evidence."""
        if not (self.has_ack and self.started):
            return None
        off = self.next_off + _delta(self.last_ack, self.next_abs)
        if self.fin_off is not None and off > self.fin_off:
            off = self.fin_off
        return off


class TcpReassembler:
    def __init__(self, max_buffered: int = 8 * 1024 * 1024):
        self.max_buffered = max_buffered
        self._halves: dict[tuple[Endpoint, Endpoint], _Half] = {}
        # Closed connections' directions -> their final sequence number: late ACKs, FIN/data retransmissions
        # of a closed connection must not start a phantom "mid-stream" connection.
        self._closed: dict[tuple[Endpoint, Endpoint], int | None] = {}
        self._conns: dict[int, _Conn] = {}
        self._next_id = 1

    # -- public -----------------------------------------------------------------------------------------------

    def feed(self, seg: Segment) -> list[StreamEvent]:
        half = self._halves.get((seg.src, seg.dst))
        flags = seg.flags
        if (half is not None and not flags & 0x07 and not half.ooo and seg.seq == half.next_abs
                and not seg.truncated and (not flags & ACK or not half.peer.ooo)):
            # The common case: the next bytes in order, nothing waiting. No copies, no buffering.
            if flags & ACK:
                peer = half.peer
                peer.last_ack = seg.ack
                peer.has_ack = True
            payload = seg.payload
            if not payload:
                return []
            n = len(payload)
            half.next_abs = (half.next_abs + n) & _M
            half.next_off += n
            return [_stream_data(half.conn.id, seg.src, seg.dst, payload, seg.frame, seg.ts)]
        return self._feed(seg, half)

    def finish(self, frame: int, ts: float) -> list[StreamEvent]:
        """End of capture: declare what is still missing lost and close every connection."""
        out: list[StreamEvent] = []
        for conn in sorted(self._conns.values(), key=lambda c: c.id):
            self._close(conn, "end_of_capture", frame, ts, out)
        self._closed.clear()
        return out

    # -- the slow path ----------------------------------------------------------------------------------------

    def _new_conn(self, src: Endpoint, dst: Endpoint) -> _Half:
        conn = _Conn(self._next_id)
        self._next_id += 1
        a, b = _Half(conn, src, dst), _Half(conn, dst, src)
        a.peer, b.peer = b, a
        conn.halves = [a, b]
        self._conns[conn.id] = conn
        self._halves[(src, dst)] = a
        self._halves[(dst, src)] = b
        self._closed.pop((src, dst), None)
        self._closed.pop((dst, src), None)
        return a

    def _feed(self, seg: Segment, half: _Half | None) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        flags = seg.flags
        seq = seg.seq
        if flags & SYN:
            if half is None:
                half = self._new_conn(seg.src, seg.dst)
            elif half.started and half.isn != seq:
                # A SYN with a new ISN on a live 4-tuple: the port was reused for a new connection.
                self._close(half.conn, "reused", seg.frame, seg.ts, out)
                half = self._new_conn(seg.src, seg.dst)
            if not half.started:
                half.start(seq + 1)
                half.isn = seq
            seq = (seq + 1) & _M  # the SYN takes one sequence number; data (TCP Fast Open) follows it
        elif half is None:
            key = (seg.src, seg.dst)
            if key in self._closed:
                final = self._closed[key]
                if not seg.payload or (final is not None and _delta(seq, final) <= 0):
                    return out  # a late segment of a connection already closed
            half = self._new_conn(seg.src, seg.dst)
        if not half.started:
            half.start(seq)  # capture started mid-connection: the first segment seen sets the base
        if flags & ACK:
            peer = half.peer
            peer.last_ack = seg.ack
            peer.has_ack = True
            if peer.ooo:
                self._ack_evidence(peer, seg, out)
        if seg.payload or seg.truncated:
            self._add(half, half.next_off + _delta(seq, half.next_abs), seg, out)
        if flags & FIN and half.fin_off is None:
            half.fin_off = half.next_off + _delta(seq, half.next_abs) + len(seg.payload) + seg.truncated
        if flags & RST:
            self._close(half.conn, "rst", seg.frame, seg.ts, out)
        elif half.fin_off is not None and half.peer.fin_off is not None:
            self._close(half.conn, "fin", seg.frame, seg.ts, out)
        return out

    def _add(self, half: _Half, off: int, seg: Segment, out: list) -> None:
        payload = seg.payload
        end = off + len(payload)
        nxt = half.next_off
        if end + seg.truncated <= nxt:
            return  # a retransmission of bytes already delivered
        if off < nxt:
            payload = payload[nxt - off:] if end > nxt else b""
            off = nxt
        if off == nxt and not half.ooo:
            if payload:
                out.append(StreamData(half.conn.id, half.src, half.dst, payload, seg.frame, seg.ts))
                nxt = end
            if seg.truncated:
                stop = end + seg.truncated
                out.append(StreamGap(half.conn.id, half.src, half.dst, stop - nxt, seg.frame, seg.ts))
                nxt = stop
            half.next_off = nxt
            half.next_abs = (half.base + nxt) & _M
            return
        if payload:
            self._insert(half, off, end, payload)
        if seg.truncated:
            self._insert(half, end, end + seg.truncated, None)
        if half.ooo[0][0] <= half.next_off:
            self._release(half, half.next_off, seg, out)
        if half.ooo:
            self._ack_evidence(half, seg, out)
        while half.ooo_bytes > self.max_buffered:
            self._release(half, half.ooo[0][0], seg, out)

    def _ack_evidence(self, half: _Half, seg: Segment, out: list) -> None:
        acked = half.ack_offset()
        if acked is not None and acked > half.next_off:
            self._release(half, min(acked, half.ooo[-1][1]), seg, out)

    @staticmethod
    def _insert(half: _Half, start: int, end: int, data: bytes | None) -> None:
        """Buffer [start, end) where nothing is buffered yet (the first copy of a byte wins)."""
        ooo = half.ooo
        i = bisect_left(ooo, start, key=lambda e: e[0])
        if i and ooo[i - 1][1] > start:
            i -= 1
        j, cur, new = i, start, []
        while j < len(ooo) and ooo[j][0] < end:
            s, e, _d = ooo[j]
            if s > cur:
                new.append((cur, s, None if data is None else data[cur - start:s - start]))
            cur = max(cur, e)
            j += 1
        if cur < end:
            new.append((cur, end, None if data is None else data[cur - start:]))
        if new:
            half.ooo_bytes += sum(e - s for s, e, d in new if d is not None)
            ooo[i:j] = sorted(ooo[i:j] + new, key=lambda e: e[0])

    @staticmethod
    def _release(half: _Half, upto: int, seg: Segment, out: list) -> None:
        """Deliver what is contiguous from next_off; holes below `upto` are declared lost on the way."""
        conn, src, dst, frame, ts = half.conn.id, half.src, half.dst, seg.frame, seg.ts
        nxt, ooo = half.next_off, half.ooo
        pieces: list = []

        def lost(n: int) -> None:
            if pieces:
                out.append(StreamData(conn, src, dst, b"".join(pieces), frame, ts))
                pieces.clear()
            out.append(StreamGap(conn, src, dst, n, frame, ts))

        while ooo:
            start, end, data = ooo[0]
            if start > nxt:
                if nxt >= upto:
                    break
                hole_end = min(start, upto)
                lost(hole_end - nxt)
                nxt = hole_end
                if nxt < start:
                    break
            del ooo[0]
            if data is not None:
                half.ooo_bytes -= end - start
            if end <= nxt:
                continue
            if data is None:
                lost(end - nxt)
            else:
                pieces.append(data if start >= nxt else data[nxt - start:])
            nxt = end
        if nxt < upto:
            lost(upto - nxt)
            nxt = upto
        if pieces:
            out.append(StreamData(conn, src, dst, pieces[0] if len(pieces) == 1 else b"".join(pieces), frame, ts))
        half.next_off = nxt
        half.next_abs = (half.base + nxt) & _M

    def _close(self, conn: _Conn, reason: str, frame: int, ts: float, out: list) -> None:
        """Flush both directions (what never arrived is lost), then report the close and forget the 4-tuple."""
        marker = _segment(frame, ts, conn.halves[0].src, conn.halves[0].dst, 0, 0, b"")
        for half in conn.halves:
            if not half.started:
                continue
            target = half.ooo[-1][1] if half.ooo else half.next_off
            if half.fin_off is not None:
                target = max(target, half.fin_off)
            acked = half.ack_offset()
            if acked is not None:
                target = max(target, acked)
            if target > half.next_off or half.ooo:
                self._release(half, target, marker, out)
        out.append(_connection_closed(conn.id, reason, frame, ts))
        del self._conns[conn.id]
        for half in conn.halves:
            key = (half.src, half.dst)
            if self._halves.get(key) is half:
                del self._halves[key]
            self._closed[key] = half.next_abs if half.started else None
        # Unlinked, a closed connection is freed at once by its reference count: left as a cycle (conn <-> halves,
        # half <-> peer) it waits for the cycle collector, whose passes over 100,000 of them cost ~10% of analyze.
        for half in conn.halves:
            del half.peer
        conn.halves.clear()
