"""TcpReassembler scenarios, fed segment by segment (sans-IO playbooks)."""

from __future__ import annotations

from fetchtool.capture.events import (
    ACK, FIN, PSH, RST, SYN, ConnectionClosed, Endpoint, Segment, StreamData, StreamGap,
)
from fetchtool.capture.reassembly import TcpReassembler

C = Endpoint("10.0.0.1", 40000)
S = Endpoint("10.0.0.2", 9092)


class Wire:
    """Numbers frames and sequence numbers for a scenario; `r` is the reassembler under test."""

    def __init__(self, max_buffered: int = 8 * 1024 * 1024):
        self.r = TcpReassembler(max_buffered=max_buffered)
        self.frame = 0

    def feed(self, src, seq, flags=PSH | ACK, payload=b"", ack=0, truncated=0):
        self.frame += 1
        dst = S if src == C else C
        return self.r.feed(Segment(self.frame, 100.0 + self.frame, src, dst, seq & 0xFFFFFFFF, flags, payload,
                                   ack & 0xFFFFFFFF, truncated))

    def finish(self):
        return self.r.finish(self.frame, 100.0 + self.frame)


def data_of(events, src=None):
    return b"".join(e.data for e in events if isinstance(e, StreamData) and (src is None or e.src == src))


def test_handshake_data_and_fin_from_both_sides_close_after_the_data():
    w = Wire()
    assert w.feed(C, 100, SYN) == []
    assert w.feed(S, 900, SYN | ACK, ack=101) == []
    assert w.feed(C, 101, ACK, ack=901) == []
    (d,) = w.feed(C, 101, payload=b"request", ack=901)
    assert (d.conn, d.src, d.dst, d.data, d.frame) == (1, C, S, b"request", 4)
    assert data_of(w.feed(S, 901, payload=b"response", ack=108)) == b"response"
    assert w.feed(C, 108, FIN | ACK, ack=909) == []
    events = w.feed(S, 909, FIN | ACK, payload=b"!", ack=109)
    assert data_of(events) == b"!"
    assert events[-1] == ConnectionClosed(1, "fin", 7, 107.0)
    assert w.feed(C, 109, ACK, ack=911) == []  # the last ACK does not start a phantom connection
    assert w.finish() == []


def test_rst_closes_the_connection_after_its_data():
    w = Wire()
    w.feed(C, 1, payload=b"abc")
    events = w.feed(S, 50, RST | ACK, ack=4)
    assert events == [ConnectionClosed(1, "rst", 2, 102.0)]


def test_capture_started_mid_connection_uses_the_first_segment_seen_as_base():
    w = Wire()
    assert data_of(w.feed(S, 123456789, payload=b"tail of a response", ack=5)) == b"tail of a response"
    assert data_of(w.feed(C, 5, payload=b"next request", ack=123456789 + 18)) == b"next request"
    (closed,) = w.finish()
    assert closed.reason == "end_of_capture" and closed.conn == 1


def test_a_late_segment_that_fills_a_hole_releases_the_data_with_its_own_frame():
    w = Wire()
    w.feed(C, 1, payload=b"aaaa")
    assert w.feed(C, 9, payload=b"cccc") == []  # frame 2 waits behind a hole
    assert w.feed(C, 13, payload=b"dddd") == []  # frame 3 too
    (d,) = w.feed(C, 5, payload=b"bbbb")  # frame 4 fills it
    assert (d.data, d.frame, d.ts) == (b"bbbbccccdddd", 4, 104.0)


def test_retransmissions_and_overlaps_are_trimmed_first_copy_wins():
    w = Wire()
    w.feed(C, 1, payload=b"0123")
    assert w.feed(C, 1, payload=b"0123") == []  # exact retransmission of delivered bytes
    assert data_of(w.feed(C, 3, payload=b"XX45")) == b"45"  # overlap: the first copy of seq 3,4 wins
    assert w.feed(C, 11, payload=b"abcd") == []  # seq 11-14 wait behind a hole (7-10)
    assert w.feed(C, 9, payload=b"YYYYef") == []  # only 9,10 are new; "ef" loses to the buffered "cd"
    # The filler brings 7-10, but 9,10 were buffered first: "YY" wins over "89".
    assert data_of(w.feed(C, 7, payload=b"6789")) == b"67YYabcd"


def test_sequence_numbers_wrap_around_32_bits():
    w = Wire()
    isn = 0xFFFFFFF0
    w.feed(C, isn, SYN)
    out = []
    seq = isn + 1
    for i in range(10):
        chunk = bytes([65 + i]) * 7
        out += w.feed(C, seq, payload=chunk)
        seq += 7
    assert data_of(out) == b"".join(bytes([65 + i]) * 7 for i in range(10))
    assert not [e for e in out if isinstance(e, StreamGap)]


def test_the_peers_ack_beyond_a_hole_declares_it_lost_and_the_stream_continues():
    w = Wire()
    w.feed(C, 1, payload=b"a" * 10)
    assert w.feed(C, 21, payload=b"c" * 10) == []  # bytes 11..20 never captured
    events = w.feed(S, 500, ACK, ack=31)  # the broker received up to 30: the capture lost 10 bytes
    assert events == [StreamGap(1, C, S, 10, 3, 103.0), StreamData(1, C, S, b"c" * 10, 3, 103.0)]
    assert data_of(w.feed(C, 31, payload=b"d")) == b"d"


def test_an_ack_seen_before_the_data_after_the_hole_still_counts_as_evidence():
    w = Wire()
    w.feed(C, 1, payload=b"a" * 10)
    w.feed(S, 500, ACK, ack=31)  # acknowledges 11..30 which the capture has not shown yet
    events = w.feed(C, 21, payload=b"c" * 10)
    assert [type(e) for e in events] == [StreamGap, StreamData] and events[0].lost_bytes == 10


def test_too_much_waiting_data_declares_the_hole_lost():
    w = Wire(max_buffered=100)
    w.feed(C, 1, payload=b"a")
    out = []
    for i in range(3):
        out += w.feed(C, 1000 + 60 * i, payload=b"x" * 60)
    gaps = [e for e in out if isinstance(e, StreamGap)]
    assert [g.lost_bytes for g in gaps] == [998] and data_of(out) == b"x" * 180


def test_holes_left_at_fin_rst_or_end_of_capture_are_lost_bytes():
    for closing in ("fin", "rst", "end"):
        w = Wire()
        w.feed(C, 1, payload=b"a" * 10)
        w.feed(C, 16, payload=b"b" * 5)
        if closing == "fin":
            w.feed(C, 21, FIN | ACK)
            events = w.feed(S, 1, FIN | ACK, ack=22)
        elif closing == "rst":
            events = w.feed(S, 1, RST)
        else:
            events = w.finish()
        assert [(type(e).__name__, getattr(e, "lost_bytes", None)) for e in events] == [
            ("StreamGap", 5), ("StreamData", None), ("ConnectionClosed", None)]
        assert events[-1].reason == {"end": "end_of_capture"}.get(closing, closing)


def test_a_new_syn_on_a_reused_port_closes_the_old_connection_and_starts_a_new_one():
    w = Wire()
    w.feed(C, 100, SYN)
    w.feed(S, 900, SYN | ACK, ack=101)
    w.feed(C, 101, payload=b"old", ack=901)
    assert w.feed(C, 100, SYN) == []  # a retransmitted SYN (same ISN) does not split
    assert w.feed(S, 900, SYN | ACK, ack=101) == []  # nor does a retransmitted SYN-ACK
    events = w.feed(C, 7000, SYN)  # the client reuses its port: new ISN
    assert events == [ConnectionClosed(1, "reused", 6, 106.0)]
    w.feed(S, 3000, SYN | ACK, ack=7001)
    (d,) = w.feed(C, 7001, payload=b"new", ack=3001)
    assert (d.conn, d.data) == (2, b"new")
    assert [e.conn for e in w.finish()] == [2]


def test_a_syn_on_a_tuple_seen_only_mid_stream_is_a_new_connection():
    w = Wire()
    w.feed(S, 5000, payload=b"old data")
    assert w.feed(C, 1, SYN) == []  # the client half was never seen: this SYN may belong to the same conn
    events = w.feed(S, 77, SYN | ACK, ack=2)  # but the broker answers with a fresh ISN: a new connection
    assert [type(e).__name__ for e in events] == ["ConnectionClosed"] and events[0].reason == "reused"


def test_a_truncated_packet_delivers_what_was_captured_then_a_gap():
    w = Wire()
    events = w.feed(C, 1, payload=b"head", truncated=96)
    assert events == [StreamData(1, C, S, b"head", 1, 101.0), StreamGap(1, C, S, 96, 1, 101.0)]
    assert data_of(w.feed(C, 101, payload=b"next")) == b"next"
    # Out of order, the cut bytes wait as a known-lost range and are reported when their turn comes.
    w.feed(C, 205, payload=b"late", truncated=10)
    events = w.feed(C, 105, payload=b"z" * 100)
    assert [(type(e).__name__, getattr(e, "lost_bytes", 0)) for e in events] == [
        ("StreamData", 0), ("StreamGap", 10)]
    assert data_of(events) == b"z" * 100 + b"late"


def test_events_of_other_connections_are_independent():
    w = Wire()
    other = Endpoint("10.0.0.3", 40001)
    w.feed(C, 1, payload=b"one")
    w.frame += 1
    events = w.r.feed(Segment(w.frame, 1.0, other, S, 10, PSH | ACK, b"two"))
    assert [(e.conn, e.data) for e in events] == [(2, b"two")]
