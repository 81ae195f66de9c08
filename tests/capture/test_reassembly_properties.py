"""Property tests: the reassembler rebuilds the sender's bytes whatever the network (or the capture) did."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fetchtool.capture.events import ACK, PSH, SYN, Endpoint, Segment, StreamData, StreamGap
from fetchtool.capture.reassembly import TcpReassembler

C = Endpoint("10.0.0.1", 40000)
S = Endpoint("10.0.0.2", 9092)
M = 0xFFFFFFFF


@st.composite
def transmissions(draw, max_len=4000):
    """Data, an ISN, and the pieces it was sent in: a segmentation, plus overlapping retransmissions and
    duplicates, in any order. Each piece is (offset, length)."""
    data = draw(st.binary(min_size=1, max_size=max_len))
    n = len(data)
    cuts = sorted(draw(st.sets(st.integers(1, n - 1), max_size=min(40, n - 1))) if n > 1 else [])
    bounds = [0, *cuts, n]
    pieces = [(a, b - a) for a, b in zip(bounds, bounds[1:])]
    retrans = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(1, n)), max_size=8))
    pieces += [(a, min(length, n - a)) for a, length in retrans]
    pieces += draw(st.lists(st.sampled_from(pieces), max_size=5))  # exact duplicates
    order = draw(st.permutations(range(len(pieces))))
    isn = draw(st.one_of(st.integers(0, M), st.integers(M - n - 4, M)))  # often wrapping through 2**32
    return data, isn, [pieces[i] for i in order], len(bounds) - 1


def run(data, isn, pieces, final_ack):
    r = TcpReassembler()
    frame = 1
    events = r.feed(Segment(frame, 0.0, C, S, isn, SYN, b""))
    for off, length in pieces:
        frame += 1
        events += r.feed(Segment(frame, frame, C, S, (isn + 1 + off) & M, PSH | ACK, data[off:off + length], 1))
    if final_ack:
        frame += 1
        events += r.feed(Segment(frame, frame, S, C, 77, ACK, b"", (isn + 1 + len(data)) & M))
    run.before_finish = list(events)
    events += r.finish(frame, frame)
    return events


@settings(max_examples=300, deadline=None)
@given(transmissions())
def test_any_segmentation_order_duplication_and_overlap_yields_the_same_bytes(t):
    data, isn, pieces, _ = t
    events = run(data, isn, pieces, final_ack=False)
    assert b"".join(e.data for e in events if isinstance(e, StreamData)) == data
    assert not [e for e in events if isinstance(e, StreamGap)]


@settings(max_examples=300, deadline=None)
@given(transmissions(), st.data())
def test_dropped_segments_are_reported_as_exactly_the_missing_bytes(t, draw):
    data, isn, pieces, _ = t
    keep = [p for p in pieces if draw.draw(st.booleans())]
    covered = bytearray(len(data))
    for off, length in keep:
        covered[off:off + length] = b"\x01" * length
    events = run(data, isn, keep, final_ack=True)  # the broker's ACK: evidence it got every byte
    rebuilt, lost = bytearray(), bytearray()
    for e in events:
        if isinstance(e, StreamData):
            rebuilt += e.data
            lost += b"\x00" * len(e.data)
        elif isinstance(e, StreamGap):
            rebuilt += b"\x00" * e.lost_bytes
            lost += b"\x01" * e.lost_bytes
    assert len(rebuilt) == len(data)
    assert lost == bytes(1 - c for c in covered)  # gaps exactly where no kept segment carried the byte
    assert all(rebuilt[i] == data[i] for i in range(len(data)) if covered[i])
    # The ACK, not the end of the capture, declared every hole that has captured bytes after it.
    settled = sum(len(e.data) if isinstance(e, StreamData) else e.lost_bytes
                  for e in run.before_finish if isinstance(e, (StreamData, StreamGap)))
    assert settled == covered.rfind(1) + 1


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=300), min_size=1, max_size=30), st.integers(0, M))
def test_in_order_segments_are_handed_on_as_the_same_objects(chunks, isn):
    """The short path: no copies, one StreamData per segment, in order."""
    r = TcpReassembler()
    r.feed(Segment(1, 0.0, C, S, isn, SYN, b""))
    off = 1
    for i, chunk in enumerate(chunks):
        (ev,) = r.feed(Segment(i + 2, 0.0, C, S, (isn + off) & M, PSH | ACK, chunk))
        assert ev.data is chunk and ev.frame == i + 2
        off += len(chunk)
