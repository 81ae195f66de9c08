"""Damaged, odd and hostile input: the capture layer reports it (one-line error or counted warning) and
still delivers whatever could be read."""

from __future__ import annotations

import gzip
import os

import pytest

from fetchtool.capture.events import ACK, PSH
from fetchtool.capture.frames import ethernet, ip_packet, raw, sll
from fetchtool.capture.packets import W_FRAGMENT, W_TRUNCATED, CaptureStats, iter_segments
from fetchtool.capture.reader import CaptureError, read_records
from fetchtool.capture.writer import PcapNgWriter, PcapWriter, TcpConversation

from .conftest import BROKER, BROKER6, CLIENT, CLIENT6, T0, read_capture


def small_capture(path, payloads, **writer_options):
    with PcapWriter(path, 1, **writer_options) as w:
        conv = TcpConversation(w, CLIENT, BROKER, segment_size=1000)
        t = conv.handshake(T0)
        conv.send("server", payloads(10_000), t)
        return w.frames


@pytest.mark.parametrize("kind", ["pcap", "pcapng", "pcap.gz"])
def test_a_file_cut_mid_record_yields_every_complete_record_and_one_warning(tmp_path, payloads, kind):
    whole = tmp_path / "whole"
    if kind == "pcapng":
        with PcapNgWriter(whole) as w:
            w.add_interface(1)
            TcpConversation(w, CLIENT, BROKER, segment_size=1000).send("server", payloads(10_000), T0)
            frames = w.frames
    else:
        frames = small_capture(whole, payloads)
    data = whole.read_bytes()
    cut = tmp_path / "cut"
    cut.write_bytes(gzip.compress(data[:-20]) if kind.endswith("gz") else data[:-20])
    stats = CaptureStats()
    segments = list(iter_segments(cut, stats))
    assert [s.frame for s in segments] == list(range(1, frames))  # the last record is the cut one
    assert sum(stats.warnings.values()) == 1
    (text,) = stats.warnings
    assert "cut" in text and "cut" in text.split(":")[0] + text  # names the file ("cut") and the damage


def test_a_gzip_stream_cut_short_is_a_warning_not_a_crash(tmp_path, payloads):
    whole = tmp_path / "whole.pcap"
    small_capture(whole, payloads)
    packed = gzip.compress(whole.read_bytes())
    damaged = tmp_path / "damaged.pcap.gz"
    damaged.write_bytes(packed[: len(packed) * 2 // 3])
    stats = CaptureStats()
    segments = list(iter_segments(damaged, stats))
    assert 0 < len(segments) < 14
    assert any("gzip" in w for w in stats.warnings)


@pytest.mark.parametrize("content, expect", [
    (b'{"not": "a capture"}\n', "7b 22 6e 6f"),
    (b"\x00\x01\x02", "00 01 02"),
    (b"", "empty"),
])
def test_a_file_that_is_not_a_capture_is_a_one_line_error(tmp_path, content, expect):
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    with pytest.raises(CaptureError) as err:
        list(iter_segments(path))
    message = str(err.value)
    assert "\n" not in message and str(path) in message and expect in message


def test_gzip_of_something_else_says_so(tmp_path):
    path = tmp_path / "log.gz"
    path.write_bytes(gzip.compress(b"2024-01-01 INFO started\n"))
    with pytest.raises(CaptureError, match=r"log\.gz: gzip-compressed file, not a pcap.*'2024-01-'"):
        list(read_records(path))


def test_missing_or_unreadable_paths_are_capture_errors(tmp_path):
    with pytest.raises(CaptureError, match="nope.pcap: cannot open"):
        list(iter_segments(tmp_path / "nope.pcap"))
    with pytest.raises(CaptureError, match="is a directory"):
        list(iter_segments(tmp_path))


def test_unsupported_link_type_is_counted_per_interface_and_other_interfaces_still_read(tmp_path, payloads):
    path = tmp_path / "mixed.pcapng"
    with PcapNgWriter(path) as w:
        usb = w.add_interface(220)
        eth = w.add_interface(1)
        for i in range(3):
            w.write(b"\x80" * 64, T0 + i, interface=usb)
        TcpConversation(w, CLIENT, BROKER, interface=eth, segment_size=500).send("client", payloads(1500), T0 + 5)
    cap = read_capture(path)
    assert cap.stream(CLIENT) == payloads(1500)
    assert cap.segments[0].frame == 4  # frame numbers count the skipped records
    (text, count), = cap.stats.warnings.items()
    assert count == 3 and "220" in text and "USB_LINUX_MMAPPED" in text and "interface 0" in text


def test_only_unsupported_link_types_is_an_error(tmp_path):
    path = tmp_path / "usb.pcap"
    with PcapWriter(path, 220) as w:
        w.write(b"\x80" * 64, T0)
    with pytest.raises(CaptureError, match="usb.pcap: nothing could be read: unsupported link type 220"):
        list(iter_segments(path))


def test_empty_capture_is_not_an_error(tmp_path):
    path = tmp_path / "empty.pcap"
    PcapWriter(path, 1).close()
    stats = CaptureStats()
    assert list(iter_segments(path, stats)) == [] and stats.packets == 0


def test_non_tcp_traffic_is_counted_and_frames_keep_their_record_numbers(tmp_path, payloads):
    path = tmp_path / "mixed.pcap"
    udp = bytearray(ip_packet(CLIENT, BROKER, 1, payload=b"dns?"))
    udp[9] = 17
    arp = b"\xff" * 6 + b"\x02" * 6 + b"\x08\x06" + b"\x00" * 28
    with PcapWriter(path, 1) as w:
        w.write(ethernet(bytes(udp)), T0)
        w.write(arp, T0)
        TcpConversation(w, CLIENT, BROKER, segment_size=400).send("client", payloads(800), T0 + 1)
    cap = read_capture(path)
    assert [s.frame for s in cap.segments] == [3, 4, 5]
    assert cap.stats.skipped_non_tcp == 2 and cap.stats.packets == 5


def test_ip_options_and_ipv6_extension_headers_are_walked(tmp_path):
    path = tmp_path / "ext.pcap"
    with PcapWriter(path, 101) as w:
        w.write(ip_packet(CLIENT, BROKER, 1, 1, PSH | ACK, b"v4 options", ip_options=b"\x94\x04\x00\x00"), T0)
        w.write(ip_packet(CLIENT6, BROKER6, 1, 1, PSH | ACK, b"v6 ext", ipv6_ext=(0, 43, 60)), T0)
    payloads = [s.payload for s in read_capture(path).segments]
    assert payloads == [b"v4 options", b"v6 ext"]


def test_ip_fragments_are_counted_not_reassembled(tmp_path):
    path = tmp_path / "frag.pcap"
    with PcapWriter(path, 101) as w:
        w.write(ip_packet(CLIENT, BROKER, 1, 1, ACK, b"first", fragment=0x2000), T0)
        w.write(ip_packet(CLIENT6, BROKER6, 1, 1, ACK, b"v6 frag", ipv6_ext=(0, 44)), T0)
        w.write(ip_packet(CLIENT, BROKER, 6, 1, ACK, b"whole"), T0)
    cap = read_capture(path)
    assert [s.payload for s in cap.segments] == [b"whole"]
    assert cap.stats.warnings[W_FRAGMENT] == 2


def test_ethernet_padding_is_trimmed_and_tso_length_zero_means_rest_of_frame(tmp_path):
    path = tmp_path / "pad.pcap"
    with PcapWriter(path, 1) as w:
        w.write(ethernet(ip_packet(CLIENT, BROKER, 1, 1, ACK, b"hi"), pad=True, fcs=True), T0)
        w.write(ethernet(ip_packet(CLIENT, BROKER, 3, 1, ACK, b"tso" * 10, total_length=0)), T0)
    assert [s.payload for s in read_capture(path).segments] == [b"hi", b"tso" * 10]


def test_a_packet_cut_by_the_snaplen_yields_its_payload_and_the_rest_as_a_gap(tmp_path, payloads):
    path = tmp_path / "snap.pcap"
    data = payloads(3000)
    with PcapWriter(path, 113, snaplen=1000) as w:
        conv = TcpConversation(w, CLIENT, BROKER, segment_size=1500)
        t = conv.handshake(T0)
        t = conv.send("client", data, t, snap=16 + 40 + 1000)
        conv.close(t)
    cap = read_capture(path)
    assert cap.stats.warnings[W_TRUNCATED] == 2
    assert [g.lost_bytes for g in cap.gaps] == [500, 500]
    assert cap.stream(CLIENT) == data[:1000] + data[1500:2500]
    assert [c.reason for c in cap.closed] == ["fin"]


def test_pcapng_simple_packet_blocks_without_snaplen_use_the_block_size(tmp_path):
    path = tmp_path / "spb.pcapng"
    with PcapNgWriter(path) as w:
        w.add_interface(113)
        frame = sll(ip_packet(CLIENT, BROKER, 1, 1, PSH | ACK, b"x" * 70_000))
        w.write(frame, T0)
        w.write_simple(frame)
    cap = read_capture(path)
    assert [len(s.payload) for s in cap.segments] == [70_000, 70_000]
    assert cap.segments[1].ts == cap.segments[0].ts


def test_raw_frames_that_are_not_ip_are_skipped(tmp_path):
    path = tmp_path / "junk.pcap"
    with PcapWriter(path, 101) as w:
        w.write(raw(b"\x00" * 40), T0)  # version 0
        w.write(raw(b"\x45" + b"\x00" * 5), T0)  # too short for an IPv4 header
    stats = CaptureStats()
    assert list(iter_segments(path, stats)) == []
    assert stats.packets == 2 and sum(stats.warnings.values()) == 2
    assert os.path.exists(path)
