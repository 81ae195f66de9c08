"""The framer under arbitrary chunking, gaps inside and across frames, and absurd sizes."""

from struct import pack

from hypothesis import given, settings
from hypothesis import strategies as st

from fetchtool.protocol.framing import Framer


def frames_of(payloads):
    return b"".join(pack(">i", len(p)) + p for p in payloads)


def no_scan(buf, start):  # a direction that must never need resynchronising
    raise AssertionError("unexpected resync")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(min_size=4, max_size=300), min_size=1, max_size=8), st.data())
def test_any_chunking_gives_the_same_frames(payloads, data):
    stream = frames_of(payloads)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=20)))
    framer = Framer(no_scan)
    got = []
    prev = 0
    for i, cut in enumerate(cuts + [len(stream)]):
        for fr in framer.feed(stream[prev:cut], i + 1, float(i)):
            got.append((bytes(fr.payload), fr.size, fr.frame))
        prev = cut
    assert [g[0] for g in got] == payloads
    assert [g[1] for g in got] == [len(p) + 4 for p in payloads]
    # the frame number is the piece that delivered the message's last byte
    ends = [sum(len(p) + 4 for p in payloads[: i + 1]) for i in range(len(payloads))]
    pieces = cuts + [len(stream)]
    assert [g[2] for g in got] == [next(i + 1 for i, c in enumerate(pieces) if c >= e) for e in ends]


def test_megabyte_frame_in_64k_pieces_is_linear():
    big = bytes(range(256)) * 4096  # 1 MiB
    stream = frames_of([big, b"tail"])
    framer = Framer(no_scan)
    out = []
    for i in range(0, len(stream), 65536):
        out += framer.feed(stream[i : i + 65536], i, 0.0)
    assert [bytes(f.payload) for f in out] == [big, b"tail"]
    assert framer.buffered == 0


def test_gap_inside_a_known_frame_skips_exactly_to_the_next_one():
    a, b, c = b"A" * 1000, b"B" * 50, b"C" * 60
    stream = frames_of([a, b, c])
    framer = Framer(no_scan)
    assert framer.feed(stream[:300], 1, 0.0) == []
    framer.gap(500)  # bytes 300..799 lost, still inside frame A (ends at 1004)
    out = framer.feed(stream[800:], 3, 0.0)
    assert [bytes(f.payload) for f in out] == [b, c]
    assert framer.dropped_frames == 1


def test_gap_across_frames_resyncs_with_the_scanner():
    a, b, c = b"A" * 100, b"B" * 50, b"C" * 60
    stream = frames_of([a, b, c])
    c_start = len(stream) - 64
    seen = []

    def scan(buf, start):
        seen.append(start)
        i = bytes(buf).find(pack(">i", 60), start)
        return (i, i) if i >= 0 else (None, max(start, len(buf) - 3))

    framer = Framer(scan)
    framer.feed(stream[:50], 1, 0.0)
    framer.gap(100)  # loses the rest of A and the start of B: no way to know where C begins
    out = framer.feed(stream[150:], 2, 0.0)
    assert [bytes(f.payload) for f in out] == [c]
    assert framer.skipped_bytes == 50 + (c_start - 150)


def test_absurd_size_is_a_resync_not_an_allocation():
    calls = []

    def scan(buf, start):
        calls.append(start)
        return None, len(buf)

    framer = Framer(scan, max_size=1 << 20)
    assert framer.feed(b"\x7f\xff\xff\xff" + b"x" * 100, 1, 0.0) == []
    assert framer.bad_sizes == 1 and framer.resyncing and calls
    assert framer.buffered == 0
