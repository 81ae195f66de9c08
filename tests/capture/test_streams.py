"""The capture half in a forked child gives exactly the events, stats and errors of the in-process path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fetchtool.capture.packets import CaptureStats
from fetchtool.capture.reader import CaptureError
from fetchtool.capture.streams import stream_events_here, stream_events_in_child
from fetchtool.capture.writer import PcapNgWriter, PcapWriter, TcpConversation
from fetchtool.decoder import decode_capture

from .conftest import BROKER, CLIENT, T0

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = sorted(p for p in (ROOT / "captures").rglob("*") if p.suffix in (".pcap", ".pcapng"))


def both(path):
    here, child = CaptureStats(), CaptureStats()
    return list(stream_events_here(path, here)), here, list(stream_events_in_child(path, child)), child


def assert_no_children_left():
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_every_capture_gives_the_same_events_and_stats_from_the_child(path):
    ev_here, st_here, ev_child, st_child = both(path)
    assert ev_child == ev_here
    assert st_child == st_here
    assert_no_children_left()


def test_reordered_duplicated_lost_and_snaplen_cut_bytes_cross_the_pipe(tmp_path):
    # Released out-of-order data, trimmed retransmissions and gaps are not the captured bytes of one packet:
    # the child sends those in the batch, and they must arrive byte for byte.
    path = tmp_path / "messy.pcapng"
    with PcapNgWriter(path) as out:
        out.add_interface(1)
        conv = TcpConversation(out, CLIENT, BROKER, segment_size=100)
        ts = conv.handshake(T0)
        ts = conv.send("client", bytes(range(256)) * 4, ts, reorder=[1, 0, 3, 2, 4, 5, 6, 7, 8, 9, 10])
        ts = conv.send("server", b"x" * 1000, ts, duplicate={2}, overlap=30)
        ts = conv.send("client", b"y" * 1000, ts, drop={4})
        ts = conv.send("server", b"z" * 1000, ts, snap=120)
        conv.close(ts)
    ev_here, st_here, ev_child, st_child = both(path)
    assert ev_child == ev_here
    assert st_child == st_here
    assert [type(e).__name__ for e in ev_child].count("StreamGap") >= 2


def test_a_damaged_file_reports_the_same_events_and_one_line_error(tmp_path):
    good = ROOT / "captures" / "kafka-python-tansu.pcap"
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(good.read_bytes()[:-777])
    ev_here, st_here, ev_child, st_child = both(cut)
    assert ev_child == ev_here and st_child == st_here
    assert any("truncated" in w or "cut" in w for w in st_child.warnings)

    junk = tmp_path / "notes.txt"
    junk.write_text("not a capture at all\n")
    with pytest.raises(CaptureError) as here:
        list(stream_events_here(junk, CaptureStats()))
    with pytest.raises(CaptureError) as child:
        list(stream_events_in_child(junk, CaptureStats()))
    assert str(child.value) == str(here.value)
    assert_no_children_left()


def test_a_consumer_that_stops_early_leaves_no_process_behind(tmp_path):
    path = tmp_path / "long.pcap"
    with PcapWriter(path) as out:
        conv = TcpConversation(out, CLIENT, BROKER, segment_size=1000)
        ts = conv.handshake(T0)
        for _ in range(200):  # more than the pipe holds, so the child is still writing when we stop
            ts = conv.send("client", b"q" * 50_000, ts)
    events = stream_events_in_child(path, CaptureStats())
    first = next(events)
    assert first.data[:1] == b"q"
    events.close()
    assert_no_children_left()


def test_decode_uses_the_child_on_large_files_and_the_items_are_the_same(tmp_path, monkeypatch):
    from fetchtool.capture import streams

    path = ROOT / "captures" / "confluent-kafka-tansu.pcap"
    one = list(decode_capture(path))
    monkeypatch.setattr(streams, "BACKGROUND_MIN_BYTES", 0)
    assert streams._worth_a_child(path)
    assert list(decode_capture(path)) == one
    monkeypatch.setenv("FETCHTOOL_ONE_PROCESS", "1")
    assert not streams._worth_a_child(path)
    assert_no_children_left()
