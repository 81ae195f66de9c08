"""The capture half in a forked child gives exactly the events, stats and errors of the in-process path."""

from __future__ import annotations

from pathlib import Path

import pytest

from fetchtool.capture.reader import CaptureError
from fetchtool.capture.streams import FileRead, stream_set_events_here, stream_set_events_in_child
from fetchtool.capture.writer import PcapNgWriter, PcapWriter, TcpConversation
from fetchtool.decoder import decode_capture

from capture_files import forked_children

from .conftest import BROKER, CLIENT, T0

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = sorted(p for p in (ROOT / "captures").rglob("*") if p.suffix in (".pcap", ".pcapng"))


def both(path):
    """(events, stats, error) read here, then the same read by a forked child (which must be reaped)."""
    here, child = FileRead(path), FileRead(path)
    ev_here = list(stream_set_events_here([here]))
    with forked_children() as pids:
        ev_child = list(stream_set_events_in_child([child]))
    assert len(pids) == 1
    return (ev_here, here.stats, here.error), (ev_child, child.stats, child.error)


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_every_capture_gives_the_same_events_and_stats_from_the_child(path):
    here, child = both(path)
    assert child == here
    assert here[2] is None


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
    here, child = both(path)
    assert child == here
    assert [type(e).__name__ for e in child[0]].count("StreamGap") >= 2


def test_a_damaged_file_reports_the_same_events_and_one_line_error(tmp_path):
    good = ROOT / "captures" / "kafka-python-tansu.pcap"
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(good.read_bytes()[:-777])
    here, child = both(cut)
    assert child == here and here[2] is None
    assert any("truncated" in w or "cut" in w for w in child[1].warnings)

    junk = tmp_path / "notes.txt"
    junk.write_text("not a capture at all\n")
    (ev_here, _, err_here), (ev_child, _, err_child) = both(junk)
    assert ev_here == ev_child == []
    assert isinstance(err_here, CaptureError) and isinstance(err_child, CaptureError)
    assert str(err_child) == str(err_here)
    assert len(str(err_here).splitlines()) == 1


def test_a_consumer_that_stops_early_leaves_no_process_behind(tmp_path):
    path = tmp_path / "long.pcap"
    with PcapWriter(path) as out:
        conv = TcpConversation(out, CLIENT, BROKER, segment_size=1000)
        ts = conv.handshake(T0)
        for _ in range(200):  # more than the pipe holds, so the child is still writing when we stop
            ts = conv.send("client", b"q" * 50_000, ts)
    read = FileRead(path)
    with forked_children() as pids:
        events = stream_set_events_in_child([read])
        first = next(events)
        assert first.data[:1] == b"q"
        events.close()
    assert len(pids) == 1
    # what the child had read when it stopped is counted (the old code counted nothing: 0 packets)
    assert 0 < read.stats.packets < 200 * 50 + 3 and read.stats.bytes > 0


def test_decode_uses_the_child_on_large_files_and_the_items_are_the_same(tmp_path, monkeypatch):
    from fetchtool.capture import streams

    path = ROOT / "captures" / "confluent-kafka-tansu.pcap"
    one = list(decode_capture(path))
    monkeypatch.setattr(streams, "BACKGROUND_MIN_BYTES", 0)
    assert streams.worth_a_child(path)
    with forked_children() as pids:
        assert list(decode_capture(path)) == one
    assert len(pids) == 1
    monkeypatch.setenv("FETCHTOOL_ONE_PROCESS", "1")
    assert not streams.worth_a_child(path)
