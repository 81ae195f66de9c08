"""The fuzz targets: bytes in, and either a clean result (a decode, a counted warning, a one-line error) or an
exception that is a bug. The same functions serve the bounded run in the test suite (test_fuzz.py), the long
campaigns (run.py, atheris or a mutation loop) and the regression tests (regressions/).

    reader  a whole capture file (pcap / pcapng, gzip or not) -> the record walk, decode_capture, the decode
            report, then the analysis and its JSON, markdown and terminal reports. Clean: all of them, or
            CaptureError with a one-line message.
    codec   [flags][table index][body] -> decode_request / decode_response of one (api, version) the decoder
            handles (Fetch v0-v18 both ways, FetchSnapshot v0-v1, ApiVersions v3-v4 requests, Metadata
            v10-v13 responses). Clean: a body, or CodecError.
    stream  one TCP connection as the capture layer hands it over: records of [flags][u16 length][data]
            (flags bit 0: from the broker, bit 1: a gap of `length` lost bytes, bit 2: the connection closes)
            -> decode_events (broker detection, the framer, resync, pairing, the codec) and the analysis.
            Clean: items, a report and the analysis' JSON report. Also the framer alone on the client's bytes: every byte is framed, skipped or still
            buffered, none invented or lost.
    broker  the bytes a client sends on one connection (int32 size + request frame, repeated; at most
            BROKER_FRAMES) -> BrokerCore.handle_frame each, on a fresh broker that holds the captures' topics
            (by name and topic id). Clean: an Action for every frame (a Reply's frame is size-prefixed);
            never an exception, nor a Close for an internal error (a handler exception the broker caught).
"""

from __future__ import annotations

import logging
import os
import struct
import tempfile
import uuid
from collections import Counter

from fetchtool.capture.events import ConnectionClosed, Endpoint, StreamData, StreamGap
from fetchtool.capture.reader import CaptureError, read_records
from fetchtool.decoder import decode_capture, decode_events
from fetchtool.exchange import Exchange
from fetchtool.protocol import codec as kcodec
from fetchtool.protocol.connection import OrphanResponse
from fetchtool.protocol.framing import Framer
from fetchtool.protocol.headers import API_VERSIONS, FETCH, FETCH_SNAPSHOT, METADATA
from fetchtool.protocol.report import DecodeReport
from fetchtool.protocol.resync import scan_first_request

# (api key, version, "request" | "response"): every body the decoder reads.
CODEC_TABLE: tuple[tuple[int, int, str], ...] = (
    *((FETCH, v, kind) for v in range(19) for kind in ("request", "response")),
    *((FETCH_SNAPSHOT, v, kind) for v in range(2) for kind in ("request", "response")),
    *((API_VERSIONS, v, "request") for v in (3, 4)),
    *((METADATA, v, "response") for v in range(10, 14)),
)
CODEC_INDEX = {entry: i for i, entry in enumerate(CODEC_TABLE)}

# Topics the broker target's broker holds: names and ids that occur in captures/, so that fuzzed Fetch and
# Produce requests built from real ones reach partitions that exist.
BROKER_TOPICS: dict[str, tuple[str, int]] = {}  # name -> (topic id, partitions); filled from corpus/topics.txt
BROKER_FRAMES = 8
CLIENT = Endpoint("10.0.0.1", 50000)
BROKER = Endpoint("10.0.0.2", 9092)

_tmpdir: str | None = None


class FuzzFailure(AssertionError):
    """A clean-looking outcome that breaks a rule (e.g. a multi-line error): a bug like an exception."""


# -- reader ----------------------------------------------------------------------------------------------------
def _scratch(name: str) -> str:
    global _tmpdir
    if _tmpdir is None:
        base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        _tmpdir = tempfile.mkdtemp(prefix="fetchtool-fuzz-", dir=base)
    return os.path.join(_tmpdir, name)


def reader(data: bytes) -> None:
    path = _scratch("input.pcap")
    with open(path, "wb") as fh:
        fh.write(data)
    # The record walk itself: every record lies inside the buffer it is yielded with, frames count up from 1.
    warnings: Counter = Counter()
    last = 0
    try:
        for frame, _ts, _lt, _iface, buf, offset, caplen, _orig in read_records(path, warnings):
            if frame <= last or offset < 0 or caplen < 0 or offset + caplen > len(buf):
                raise FuzzFailure(f"record {frame} at {offset}+{caplen} outside its buffer of {len(buf)}")
            last = frame
    except CaptureError as exc:
        _one_line(exc)
    run = decode_capture([path])
    items = []
    try:
        for item in run:
            if not isinstance(item, (Exchange, OrphanResponse)):
                raise FuzzFailure(f"decode yielded {type(item).__name__}")
            items.append(item)
    except CaptureError as exc:
        _one_line(exc)
        return
    _report_ok(run.report)
    reports(items, run.report)


def reports(items: list, report: DecodeReport, text: bool = True) -> None:
    """The analysis and the reports analyze writes, from whatever the capture held: absurd timestamps, sizes and
    counts must reach them as values (the CLI campaign, cli.py, checks the same through the command line)."""
    import io
    import json

    from rich.console import Console

    from fetchtool.analysis.reports import json_report, markdown, terminal
    from fetchtool.analysis.run import analyze_items

    analysis = analyze_items(items, files=report.files, decode_report=report)
    json.loads(json_report.render(analysis))
    if text:
        markdown.render(analysis)
        terminal.render(analysis, Console(file=io.StringIO(), width=120, force_terminal=False))


def _one_line(exc: Exception) -> None:
    text = str(exc)
    if not text or "\n" in text:
        raise FuzzFailure(f"{type(exc).__name__} is not one line: {text!r}")


def _report_ok(report: DecodeReport) -> None:
    # The lines may hold a capture's strings raw (a client software name with a newline): escaping them is the
    # output edge's job (issue #18 item 0); test_fuzz.py checks that one case on its own.
    report.lines()
    report.to_dict()


# -- codec -----------------------------------------------------------------------------------------------------
_NAMES = {"6b9a1c4e-0000-4000-8000-00000000a001": "orders"}


def codec_input(api_key: int, version: int, kind: str, body: bytes, flags: int = 0) -> bytes:
    return bytes([flags, CODEC_INDEX[(api_key, version, kind)]]) + body


def codec(data: bytes) -> None:
    if len(data) < 2:
        return
    flags = data[0]
    api_key, version, kind = CODEC_TABLE[data[1] % len(CODEC_TABLE)]
    body = data[2:]
    names = _NAMES if flags & 2 else None
    try:
        if kind == "request":
            kcodec.decode_request(api_key, version, body, names)
        else:
            kcodec.decode_response(api_key, version, body, names, keep_records=bool(flags & 1))
    except kcodec.CodecError as exc:
        _one_line_or_empty(exc)


def _one_line_or_empty(exc: Exception) -> None:
    if "\n" in str(exc):
        raise FuzzFailure(f"{type(exc).__name__} is not one line: {str(exc)!r}")


# -- stream: the framer, broker detection, resync, pairing -------------------------------------------------------
def stream_records(data: bytes) -> list[tuple[int, bytes | int]]:
    """The input's records: (flags, data) or (flags, lost bytes) for a gap."""
    out: list[tuple[int, bytes | int]] = []
    pos = 0
    while pos + 3 <= len(data):
        flags, n = data[pos], int.from_bytes(data[pos + 1 : pos + 3], "big")
        pos += 3
        if flags & 2:
            out.append((flags, n))
            continue
        out.append((flags, data[pos : pos + n]))
        pos += n
    return out


def stream_input(records: list[tuple[int, bytes | int]]) -> bytes:
    out = bytearray()
    for flags, payload in records:
        if isinstance(payload, int):
            out += bytes([flags | 2]) + payload.to_bytes(2, "big")
        else:
            for i in range(0, max(len(payload), 1), 0xFFFF):
                piece = payload[i : i + 0xFFFF]
                out += bytes([flags & ~2]) + len(piece).to_bytes(2, "big") + piece
    return bytes(out)


def stream_events(data: bytes):
    frame = 0
    for flags, payload in stream_records(data):
        frame += 1
        ts = 1_700_000_000 + frame / 1000
        src, dst = (BROKER, CLIENT) if flags & 1 else (CLIENT, BROKER)
        if isinstance(payload, int):
            yield StreamGap(1, src, dst, payload or 1, frame, ts)
        elif payload:
            yield StreamData(1, src, dst, payload, frame, ts)
        if flags & 4:
            yield ConnectionClosed(1, "fin", frame, ts)
            return
    yield ConnectionClosed(1, "end_of_capture", frame + 1, 1_700_000_000 + frame)


def stream(data: bytes) -> None:
    report = DecodeReport()
    ports = frozenset({BROKER.port}) if data[:1] and data[0] & 8 else None
    items = list(decode_events(stream_events(data), "fuzz", ports, report))
    for item in items:
        if not isinstance(item, (Exchange, OrphanResponse)):
            raise FuzzFailure(f"decode yielded {type(item).__name__}")
    _report_ok(report)
    reports(items, report, text=False)  # the reader target renders the text reports too; here speed matters more
    _framer_conserves([p for f, p in stream_records(data) if not f & 3 and isinstance(p, bytes)])


def _framer_conserves(pieces: list[bytes]) -> None:
    """Every byte fed to a framer is in a frame, skipped, or still buffered."""
    framer = Framer(scan_first_request, synced=False, min_size=8)
    framed = fed = 0
    for i, piece in enumerate(pieces):
        fed += len(piece)
        for fr in framer.feed(piece, i + 1, 0.0):
            if fr.size != len(fr.payload) + 4:
                raise FuzzFailure(f"frame size {fr.size} for a payload of {len(fr.payload)}")
            framed += fr.size
    framer.end()
    if framed + framer.skipped_bytes + framer.buffered != fed:
        raise FuzzFailure(f"framer: {fed} bytes fed, {framed} framed + {framer.skipped_bytes} skipped + "
                          f"{framer.buffered} buffered")


# -- broker -----------------------------------------------------------------------------------------------------
def _broker_topics() -> dict[str, tuple[str, int]]:
    if not BROKER_TOPICS:
        path = os.path.join(os.path.dirname(__file__), "corpus", "topics.txt")
        with open(path) as fh:
            for line in fh:
                if line.strip():
                    name, tid, parts = line.split()
                    BROKER_TOPICS[name] = (tid, int(parts))
    return BROKER_TOPICS


def new_broker():
    from fetchtool.broker.handler import BrokerCore
    from fetchtool.broker.state import BrokerConfig

    log = logging.getLogger("fetchtool.broker.fuzz")
    log.setLevel(logging.CRITICAL)
    core = BrokerCore(BrokerConfig(port=9092, session_seed=18, cache_slots=4, max_frame_bytes=1 << 20), log)
    for name, (tid, parts) in _broker_topics().items():
        core.state.create_topic(name, parts, uuid.UUID(tid))
    return core


def broker_frames(data: bytes) -> list[bytes]:
    frames = []
    pos = 0
    while pos + 4 <= len(data) and len(frames) < BROKER_FRAMES:
        n = max(0, struct.unpack_from(">i", data, pos)[0])
        frames.append(data[pos + 4 : pos + 4 + n])
        pos += 4 + n
    return frames


def broker(data: bytes) -> None:
    from fetchtool.broker.handler import Close, NoReply, Reply, Wait

    core = new_broker()
    now = 1_700_000_000_000
    for frame in broker_frames(data):
        now += 10
        action = core.handle_frame(frame, "10.0.0.1:50000", now)
        if isinstance(action, Wait):
            action = core.complete_fetch(action.pending, now + 60_000)
        if isinstance(action, Reply):
            size = struct.unpack_from(">i", action.frame)[0]
            if size != len(action.frame) - 4:
                raise FuzzFailure(f"reply frame of {len(action.frame)} bytes says size {size}")
        elif isinstance(action, Close):
            if getattr(action, "internal", False):  # the handler raised and the broker caught it: still a bug
                raise FuzzFailure(f"internal error closed the connection: {action.reason}")
            _one_line(Exception(action.reason))
            return  # the connection is gone: later frames are never read
        elif not isinstance(action, NoReply):
            raise FuzzFailure(f"handle_frame returned {action!r}")


TARGETS = {"reader": reader, "codec": codec, "stream": stream, "broker": broker}
