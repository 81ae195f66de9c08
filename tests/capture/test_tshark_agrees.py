"""tshark 4.4 as an independent reader of what our writer produces: same frame numbers, times, ports and TCP
payload lengths, across sections, interfaces of different link types, SPBs, skipped blocks and big frames."""

from __future__ import annotations

import subprocess

import pytest

from fetchtool.capture.frames import ip_packet, loop
from fetchtool.capture.writer import PcapNgWriter, PcapWriter, TcpConversation

from .conftest import BROKER, BROKER6, CLIENT, CLIENT6, T0, read_capture


def tshark_rows(tshark: str, path) -> list[tuple[int, float, int, int]]:
    out = subprocess.run(
        [tshark, "-r", str(path), "-n", "-Y", "tcp", "-o", "tcp.desegment_tcp_streams:FALSE", "-T", "fields",
         "-e", "frame.number", "-e", "frame.time_epoch", "-e", "tcp.srcport", "-e", "tcp.len"],
        capture_output=True, text=True, timeout=60, check=True).stdout
    # tshark leaves a Simple Packet Block's time empty; we reuse the previous packet's (the brief's choice).
    return [(int(f), round(float(t), 5) if t else None, int(p), int(n)) for f, t, p, n in
            (line.split("\t") for line in out.splitlines())]


@pytest.mark.tshark
def test_tshark_reads_our_pcapng_like_we_do(tshark, tmp_path, payloads):
    path = tmp_path / "mixed.pcapng"
    with PcapNgWriter(path) as w:
        eth = w.add_interface(1, tsresol=9)
        sll2 = w.add_interface(276)
        a = TcpConversation(w, CLIENT, BROKER, interface=eth, segment_size=100_000, vlans=[(0x88A8, 4), (0x8100, 9)])
        t = a.handshake(T0)
        t = a.send("server", payloads(250_000), t)  # frames over 65,535 bytes
        w.write_block(4, b"\0" * 4)  # a Name Resolution Block between packets
        b = TcpConversation(w, CLIENT6, BROKER6, interface=sll2, segment_size=3000)
        t = b.send("client", payloads(7000, 1), t)
        w.new_section(byteorder="big")
        w.add_interface(108, tsresol=20, base2=True)
        c = TcpConversation(w, CLIENT, BROKER, segment_size=1000)
        t = c.send("client", payloads(2500, 2), t + 1)
        w.write_simple(loop(ip_packet(CLIENT, BROKER, 99, 1, 0x18, b"spb!")))
    ours = [(s.frame, round(s.ts, 5), s.src.port, len(s.payload)) for s in read_capture(path).segments]
    theirs = tshark_rows(tshark, path)
    assert theirs[-1][1] is None and ours[-1][1] == ours[-2][1]  # the SPB
    assert ours[:-1] == theirs[:-1] and ours[-1][:1] + ours[-1][2:] == theirs[-1][:1] + theirs[-1][2:]


@pytest.mark.tshark
def test_tshark_reads_our_big_endian_nanosecond_pcap_like_we_do(tshark, tmp_path, payloads):
    path = tmp_path / "be.pcap"
    with PcapWriter(path, 113, nanosecond=True, byteorder="big") as w:
        conv = TcpConversation(w, CLIENT, BROKER, segment_size=1448)
        t = conv.handshake(T0 + 0.123456789)
        t = conv.send("client", payloads(10_000), t)
        conv.close(t)
    ours = [(s.frame, round(s.ts, 5), s.src.port, len(s.payload)) for s in read_capture(path).segments]
    assert ours == tshark_rows(tshark, path)
