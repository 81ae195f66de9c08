"""Round trips writer -> reader -> segments -> reassembly for every file format and link-type variant,
and the reader cross-checked against scapy's independent pcap/pcapng readers."""

from __future__ import annotations

import pytest
from scapy.utils import RawPcapNgReader, RawPcapReader

from fetchtool.capture.events import Endpoint
from fetchtool.capture.reader import read_records
from fetchtool.capture.writer import PcapNgWriter, PcapWriter, TcpConversation

from .conftest import BROKER, BROKER6, CLIENT, CLIENT6, T0, read_capture

FORMATS = {
    "pcap-little-usec": (lambda p: PcapWriter(p, LT), 1e-6),
    "pcap-big-nsec": (lambda p: PcapWriter(p, LT, nanosecond=True, byteorder="big"), 1e-9),
    "pcap-gzip": (lambda p: PcapWriter(p, LT, compress=True), 1e-6),
    "pcapng-little": (lambda p: PcapNgWriter(p), 1e-6),
    "pcapng-big-nsec": (lambda p: PcapNgWriter(p, byteorder="big"), 1e-9),
    "pcapng-base2": (lambda p: PcapNgWriter(p), 2 ** -20),
    "pcapng-gzip": (lambda p: PcapNgWriter(p, compress=True), 1e-6),
}
RESOL = {"pcapng-little": (6, False), "pcapng-big-nsec": (9, False), "pcapng-base2": (20, True),
         "pcapng-gzip": (6, False)}
LT = None  # set per test through open_writer()

LINKS = {
    "ethernet": (1, {}),
    "ethernet-802.1Q": (1, {"vlans": [(0x8100, 5)]}),
    "ethernet-802.1ad-QinQ": (1, {"vlans": [(0x88A8, 100), (0x8100, 5)]}),
    "ethernet-9100-QinQ": (1, {"vlans": [(0x9100, 7), (0x8100, 8)]}),
    "ethernet-padded-fcs": (1, {"pad": True, "fcs": True}),
    "linux-sll": (113, {}),
    "linux-sll2": (276, {}),
    "raw-101": (101, {}),
    "raw-12": (12, {}),
    "raw-14": (14, {}),
    "ipv4-228": (228, {}),
    "ipv6-229": (229, {}),
    "null-little": (0, {"byteorder": "little"}),
    "null-big": (0, {"byteorder": "big"}),
    "loop-108": (108, {}),
}


def open_writer(fmt: str, path, linktype: int):
    if fmt.startswith("pcapng"):
        w = FORMATS[fmt][0](path)
        res, base2 = RESOL[fmt]
        w.add_interface(linktype, tsresol=res, base2=base2)
        return w
    global LT
    LT = linktype
    return FORMATS[fmt][0](path)


def write_exchange(w, client: Endpoint, broker: Endpoint, request: bytes, response: bytes, **link) -> list[float]:
    conv = TcpConversation(w, client, broker, segment_size=1460, step=0.000123, **link)
    t = conv.handshake(T0 + 0.5)
    t = conv.send("client", request, t)
    t = conv.send("server", response, t)
    conv.close(t)
    return [T0 + 0.5 + i * 0.000123 for i in range(w.frames)]


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("ip6", [False, True], ids=["ipv4", "ipv6"])
def test_every_format_round_trips_an_exchange(tmp_path, fmt, ip6, payloads):
    path = tmp_path / ("cap.gz" if "gzip" in fmt else "cap")
    client, broker = (CLIENT6, BROKER6) if ip6 else (CLIENT, BROKER)
    request, response = payloads(3000, 1), payloads(50_000, 2)
    with open_writer(fmt, path, 229 if ip6 else 1) as w:
        stamps = write_exchange(w, client, broker, request, response)
    cap = read_capture(path)
    assert cap.stream(client) == request and cap.stream(broker) == response
    assert [c.reason for c in cap.closed] == ["fin"] and not cap.gaps
    assert [s.frame for s in cap.segments] == list(range(1, len(stamps) + 1))
    resolution = FORMATS[fmt][1]
    for seg, ts in zip(cap.segments, stamps):
        assert abs(seg.ts - ts) <= resolution + 1e-5  # writer-side float steps drift a little
    assert cap.stats.packets == cap.stats.tcp_segments == len(stamps) and not cap.stats.warnings


@pytest.mark.parametrize("link", list(LINKS))
@pytest.mark.parametrize("ip6", [False, True], ids=["ipv4", "ipv6"])
def test_every_link_type_round_trips(tmp_path, link, ip6, payloads):
    linktype, options = LINKS[link]
    if (linktype == 228 and ip6) or (linktype == 229 and not ip6):
        pytest.skip("link type carries the other IP version only")
    client, broker = (CLIENT6, BROKER6) if ip6 else (CLIENT, BROKER)
    request, response = payloads(700, 3), payloads(20_000, 4)
    path = tmp_path / "cap.pcapng"
    with PcapNgWriter(path) as w:
        w.add_interface(linktype)
        write_exchange(w, client, broker, request, response, **options)
    cap = read_capture(path)
    assert cap.stream(client) == request and cap.stream(broker) == response
    assert cap.segments[0].src == client and cap.segments[0].dst == broker
    assert not cap.stats.warnings and cap.stats.skipped_non_tcp == 0


def test_interfaces_and_sections_each_keep_their_link_type_and_resolution(tmp_path, payloads):
    """Two sections (little then big endian), several IDBs each, SPBs, and blocks the reader must skip."""
    path = tmp_path / "multi.pcapng"
    c2, b2 = Endpoint("192.168.1.9", 51000), Endpoint("192.168.1.10", 9093)
    with PcapNgWriter(path) as w:
        w.write_block(4, b"\x00" * 8)  # a Name Resolution Block (empty) before any interface
        lo = w.add_interface(276, tsresol=9)
        eth = w.add_interface(1, tsresol=3)
        a = TcpConversation(w, CLIENT, BROKER, interface=lo, segment_size=1000)
        b = TcpConversation(w, c2, b2, interface=eth, segment_size=1000, vlans=[(0x8100, 3)])
        t = a.handshake(T0)
        t = b.handshake(t)
        t = a.send("client", payloads(2500, 1), t)
        w.write_block(5, b"\x00" * 28)  # an Interface Statistics Block
        t = b.send("client", payloads(1500, 2), T0 + 10.0)
        w.new_section(byteorder="big")
        w.add_interface(113, tsresol=20, base2=True)
        c = TcpConversation(w, CLIENT6, BROKER6, segment_size=900)
        t = c.send("server", payloads(4000, 3), T0 + 20.0)
        # Simple Packet Blocks: interface 0 of this section, the previous packet's timestamp.
        spb = TcpConversation(w, CLIENT6, BROKER6, client_isn=c.isn["client"], server_isn=c.isn["server"])
        spb.next = dict(c.next)
        for p in spb.packets("server", payloads(600, 4), segment_size=300):
            from fetchtool.capture.frames import ip_packet, sll
            w.write_simple(sll(ip_packet(BROKER6, CLIENT6, p.seq, p.ack, p.flags, p.payload)))
    cap = read_capture(path)
    assert cap.stream(CLIENT, 1) == payloads(2500, 1)
    assert cap.stream(c2, 2) == payloads(1500, 2)
    assert cap.stream(BROKER6, 3) == payloads(4000, 3) + payloads(600, 4)
    stamps = {s.frame: s.ts for s in cap.segments}
    assert abs(stamps[max(stamps)] - stamps[max(stamps) - 2]) < 1e-5  # the SPBs reuse the last EPB's time
    assert any(abs(s.ts - (T0 + 10.0)) < 1e-3 for s in cap.segments if s.src == c2)  # ms resolution interface
    assert not cap.stats.warnings
    assert [s.frame for s in cap.segments] == list(range(1, len(cap.segments) + 1))


def test_frames_over_65535_bytes_are_kept_whole(tmp_path, payloads):
    """Loopback with TSO/GSO hands tcpdump segments bigger than an IP length can say (total length 0)."""
    big = payloads(200_000, 5)
    for ip6 in (False, True):
        client, broker = (CLIENT6, BROKER6) if ip6 else (CLIENT, BROKER)
        path = tmp_path / f"big{ip6}.pcapng"
        with PcapNgWriter(path) as w:
            w.add_interface(1)
            conv = TcpConversation(w, client, broker, segment_size=150_000)
            conv.send("server", big, T0)
        cap = read_capture(path)
        assert [len(s.payload) for s in cap.segments if s.payload] == [150_000, 50_000]
        assert cap.stream(broker) == big and not cap.gaps


@pytest.mark.parametrize("fmt", ["pcap-little-usec", "pcap-big-nsec", "pcapng-little", "pcapng-big-nsec"])
def test_reader_agrees_with_scapy(tmp_path, fmt, payloads):
    path = tmp_path / "cap"
    with open_writer(fmt, path, 1) as w:
        write_exchange(w, CLIENT, BROKER, payloads(5000, 6), payloads(9000, 7))
    ours = [(frame, round(ts, 6), bytes(buf[off:off + caplen]), origlen)
            for frame, ts, _lt, _if, buf, off, caplen, origlen in read_records(path)]
    theirs = []
    if fmt.startswith("pcapng"):
        with RawPcapNgReader(str(path)) as r:
            for i, (data, meta) in enumerate(r, 1):
                ts = ((meta.tshigh << 32) | meta.tslow) / meta.tsresol
                theirs.append((i, round(ts, 6), data, meta.wirelen))
    else:
        with RawPcapReader(str(path)) as r:
            div = 1e9 if getattr(r, "nano", False) else 1e6
            for i, (data, meta) in enumerate(r, 1):
                theirs.append((i, round(meta.sec + meta.usec / div, 6), data, meta.wirelen))
    assert len(ours) == len(theirs) > 10
    assert ours == theirs


def test_segments_built_on_the_fast_path_equal_ordinary_ones(tmp_path):
    from dataclasses import astuple, replace

    from fetchtool.capture.events import Segment

    path = tmp_path / "one.pcap"
    with PcapWriter(path, 1) as w:
        TcpConversation(w, CLIENT, BROKER).send("client", b"hello", T0)
    seg = read_capture(path).segments[0]
    ordinary = Segment(*astuple(seg, tuple_factory=tuple)[:2], CLIENT, BROKER, *astuple(seg)[4:])
    assert type(seg) is Segment and seg == ordinary and hash(seg) == hash(ordinary)
    assert replace(seg, payload=b"x").payload == b"x"
    with pytest.raises(AttributeError):
        seg.payload = b"frozen"  # still frozen


def test_concatenated_gzip_members_read_as_one_file(tmp_path, payloads):
    import gzip

    plain = tmp_path / "plain.pcap"
    with PcapWriter(plain, 1) as w:
        TcpConversation(w, CLIENT, BROKER, segment_size=1000).send("client", payloads(20_000), T0)
    data = plain.read_bytes()
    multi = tmp_path / "multi.pcap.gz"
    multi.write_bytes(gzip.compress(data[:5000]) + gzip.compress(data[5000:]))
    cap = read_capture(multi)
    assert cap.stream(CLIENT) == payloads(20_000) and not cap.stats.warnings


def test_conversation_knobs_survive_the_file_round_trip(tmp_path, payloads):
    """Reordered, duplicated and overlapping segments come out as the sent bytes; a dropped one as a gap of
    its exact size, declared by the peer's ACK; a mid-stream capture (no handshake) and a RST close."""
    path = tmp_path / "knobs.pcapng"
    request, response = payloads(10_000, 1), payloads(30_000, 2)
    with PcapNgWriter(path, compress=True) as w:
        w.add_interface(1)
        conv = TcpConversation(w, CLIENT, BROKER, segment_size=1000, client_isn=0xFFFFFF00)
        # Mid-stream, the first segment seen sets the base, so only later ones are shuffled.
        t = conv.send("client", request, T0, reorder=[0, 3, 1, 2, 9, 8, 7, 6, 5, 4], duplicate={0, 5},
                      overlap=300)
        t = conv.send("server", response, t, drop={7}, reorder=[0, *range(29, 0, -1)])
        conv.close(t, rst="client")
    cap = read_capture(path)
    assert cap.stream(CLIENT) == request
    (gap,) = cap.gaps
    assert (gap.src, gap.lost_bytes) == (BROKER, 1000)
    assert cap.stream(BROKER) == response[:7000] + response[8000:]
    assert [c.reason for c in cap.closed] == ["rst"]
