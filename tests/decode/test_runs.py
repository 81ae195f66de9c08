"""Scenario: on a large capture the decoder takes a message's many packets at once (StreamRun, from the forked
reader). A user must not be able to tell: the same exchanges, frames, timestamps and report as event by event,
on every capture and on damaged, reordered and pipelined streams."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fetchtool.capture.events import Endpoint, StreamRun
from fetchtool.capture.streams import FileRead, stream_set_events_here, stream_set_events_in_child
from fetchtool.capture.writer import LINKTYPE_ETHERNET, PcapWriter, TcpConversation
from fetchtool.decoder import decode_events
from fetchtool.protocol.framing import Framer
from fetchtool.protocol.report import DecodeReport

from .sweep import write_sweep

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = sorted(p for p in (ROOT / "captures").rglob("*") if p.suffix in (".pcap", ".pcapng"))
CLIENT, BROKER = Endpoint("10.1.0.1", 40000), Endpoint("10.1.0.2", 9092)


def decoded(events):
    report = DecodeReport()
    items = list(decode_events(events, "cap.pcap", None, report))
    return items, report.lines()


def compare(path: Path) -> int:
    """Decode `path` event by event (in this process) and in runs (the forked reader's); returns the runs seen."""
    events = list(stream_set_events_in_child([FileRead(path)], runs=True))
    assert decoded(events) == decoded(stream_set_events_here([FileRead(path)]))
    return sum(type(e) is StreamRun for e in events)


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_every_capture_decodes_the_same_in_runs(path):
    compare(path)


def test_the_sweep_decodes_the_same_in_runs(tmp_path):
    write_sweep(tmp_path / "sweep.pcap")
    assert compare(tmp_path / "sweep.pcap") > 0


def _frame(corr: int, size: int, request: bool) -> bytes:
    if request:  # Fetch v12 header (client id "c") then filler the codec reports as malformed: still framed
        head = struct.pack(">hhih", 1, 12, corr, 1) + b"c\0"
    else:
        head = struct.pack(">i", corr) + b"\0"
    return struct.pack(">i", len(head) + size) + head + bytes(size)


def test_pipelined_messages_reordered_lost_and_cut_segments_decode_the_same_in_runs(tmp_path):
    # Several messages in one run of small segments (frames complete inside runs), retransmissions, reordering,
    # a lost segment (a gap inside a frame), snaplen cuts, and a connection whose capture begins mid-message.
    rnd = random.Random(5)
    path = tmp_path / "messy.pcap"
    with PcapWriter(path, linktype=LINKTYPE_ETHERNET) as out:
        ts = 1_700_000_000.0
        for c in range(4):
            conv = TcpConversation(out, Endpoint(CLIENT.ip, CLIENT.port + c), BROKER, segment_size=100 + 37 * c)
            if c != 3:
                ts = conv.handshake(ts)
            for corr in range(30):
                reqs = b"".join(_frame(corr * 3 + k, rnd.randrange(0, 700), True) for k in range(rnd.randrange(1, 4)))
                if c == 3 and corr == 0:
                    reqs = reqs[57:]  # the capture began inside a request
                segments = -(-len(reqs) // conv.segment_size)
                swap = [1, 0, *range(2, segments)] if corr % 11 == 3 and segments > 2 else ()
                ts = conv.send("client", reqs, ts, duplicate={1} if corr % 7 == 1 else (), reorder=swap)
                resp = b"".join(_frame(corr * 3 + k, rnd.randrange(0, 3000), False) for k in range(3))
                ts = conv.send("server", resp, ts, drop={2} if corr % 13 == 5 else (),
                               snap=90 if corr % 17 == 8 else None)
            conv.close(ts)
    assert compare(path) > 10


# -- the framer: pieces taken at once end as pieces fed one by one --------------------------------------------
def _waiting_scanner(wait: int):
    """A scanner that wants `wait` bytes before it believes a frame starts where it looks (an unsynced stream's
    framer meanwhile keeps the bytes and remembers which packet brought which)."""
    def scan(buf, start):
        return (start, start) if len(buf) - start >= wait else (None, start, wait)
    return scan


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 3000), min_size=1, max_size=6), st.lists(st.integers(1, 1500), min_size=1,
       max_size=60), st.one_of(st.none(), st.integers(1, 9000)))
def test_a_run_fed_to_the_framer_frames_as_its_packets_one_by_one(sizes, cuts, wait):
    stream = b"".join(_frame(i, s, False) for i, s in enumerate(sizes))
    pieces, pos, k = [], 0, 0
    while pos < len(stream):
        n = cuts[k % len(cuts)]
        pieces.append(stream[pos:pos + n])
        pos, k = pos + n, k + 1
    frames = [100 + i for i in range(len(pieces))]
    tss = [0.5 * i for i in range(len(pieces))]
    ends, total = [], 0
    for p in pieces:
        total += len(p)
        ends.append(total)

    def framed(f: Framer, got):
        return [(bytes(fr.payload), fr.frame, fr.ts, fr.size) for fr in got]

    if wait is None:  # a synced stream
        one, run = Framer(lambda b, s: (s, s)), Framer(lambda b, s: (s, s))
    else:  # a stream seen without its start: framed once the scanner believes its first byte
        one, run = Framer(_waiting_scanner(wait), synced=False), Framer(_waiting_scanner(wait), synced=False)
    want = [x for p, fr, t in zip(pieces, frames, tss) for x in framed(one, one.feed(p, fr, t))]
    got, i, taken = [], 0, 0
    while i < len(pieces):
        j = run.feed_within_frame(pieces, ends, frames, tss, i)
        taken += j - i
        if j < len(pieces):
            got += framed(run, run.feed(pieces[j], frames[j], tss[j]))
            j += 1
        i = j
    assert got == want
    assert (run.buffered, run.frames, run.peek(), run.mid_start) == (one.buffered, one.frames, one.peek(),
                                                                       one.mid_start)
    if wait is None and max(sizes) > 3 * max(cuts):
        assert taken  # a frame over several pieces: some were taken at once
