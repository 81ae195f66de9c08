"""Two decoders nobody on the team wrote, as test oracles: tshark 4.4 and kafka-python 3.0.12.

tshark reads the capture on its own (its own TCP reassembly and Kafka dissector, Fetch v0-v16). kafka-python gets
the Kafka messages from tshark's reassembled TCP streams (`-z follow,tcp,raw`), so neither path shares code with
fetchtool.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import defaultdict
from dataclasses import dataclass
from struct import unpack_from

TSHARK_FIELDS = [
    "frame.number", "kafka.correlation_id", "kafka.request_frame", "kafka.api_key", "kafka.api_version",
    "kafka.fetch_session_id", "kafka.fetch_session_epoch", "kafka.replica_id", "kafka.max_wait_time",
    "kafka.min_bytes", "kafka.max_bytes", "kafka.isolation_level", "kafka.topic_name", "kafka.topic_id",
    "kafka.partition_id", "kafka.offset", "kafka.log_start_offset", "kafka.leader_epoch",
    "kafka.last_fetched_epoch", "kafka.forgotten_topic_name", "kafka.forgotten_topic_id",
    "kafka.forgotten_topic_partition", "kafka.rack", "kafka.throttle_time", "kafka.error",
    "kafka.last_stable_offset", "kafka.client_id",
]


def _decode_as(ports) -> list[str]:
    return [arg for p in sorted(ports) for arg in ("-d", f"tcp.port=={p},kafka")]


def tshark_frames(tshark: str, path, ports) -> dict[int, dict[str, list[str]]]:
    """frame number -> field -> every value tshark shows for it in that frame (in order).

    JSON, not `-T fields`: tshark misreads Fetch v17-v18 bodies (it knows up to v16) into strings of raw bytes,
    newlines and separators included, which only an escaped format keeps apart from the next frame.
    """
    out = subprocess.run(
        [tshark, "-2", "-n", "-r", str(path), *_decode_as(ports), "-Y", "kafka", "-T", "json",
         *[a for f in TSHARK_FIELDS for a in ("-e", f)]],
        capture_output=True, check=True).stdout.decode("utf-8", "replace")
    frames = {}
    for packet in json.loads(out or "[]"):
        layers = packet["_source"]["layers"]
        # A field shown once with an empty value (an empty rack id) reads as no value, as `-T fields` printed it.
        row = {f: [str(v) for v in layers.get(f, [])] for f in TSHARK_FIELDS}
        row = {f: ([] if v == [""] else v) for f, v in row.items()}
        frames[int(row["frame.number"][0])] = row
    return frames


def tshark_opened_pairs(tshark: str, path) -> set[tuple[str, str]]:
    """(client, server) "ip:port" pairs of every connection whose opening SYN the capture holds."""
    out = subprocess.run([tshark, "-n", "-r", str(path), "-Y", "tcp.flags.syn == 1 && tcp.flags.ack == 0",
                          "-T", "fields", "-e", "ip.src", "-e", "tcp.srcport", "-e", "ip.dst", "-e", "tcp.dstport"],
                         capture_output=True, text=True, check=True).stdout
    return {(f"{a}:{b}", f"{c}:{d}") for a, b, c, d in (line.split("\t") for line in out.splitlines() if line)}


@dataclass
class Stream:
    client: str
    broker: str
    messages: list[tuple[str, bytes]]  # ("request" | "response", message without its size) in stream order


def tshark_streams(tshark: str, path) -> list[Stream]:
    """Every TCP stream as tshark reassembles it, cut into Kafka messages by their size prefix."""
    count = subprocess.run([tshark, "-n", "-r", str(path), "-T", "fields", "-e", "tcp.stream"],
                           capture_output=True, text=True, check=True).stdout.split()
    ids = sorted({int(x) for x in count if x})
    follow = [a for i in ids for a in ("-z", f"follow,tcp,raw,{i}")]
    out = subprocess.run([tshark, "-n", "-r", str(path), "-q", *follow], capture_output=True, text=True,
                         check=True).stdout
    streams = []
    for block in out.split("=" * 67):
        m = re.search(r"Filter: tcp.stream eq (\d+)\nNode 0: (\S+)\nNode 1: (\S+)\n", block)
        if not m:
            continue
        data = {0: bytearray(), 1: bytearray()}
        for line in block[m.end():].splitlines():
            if line.strip():
                data[1 if line.startswith("\t") else 0] += bytes.fromhex(line.strip())
        node = {0: m.group(2), 1: m.group(3)}
        req_side = 0 if _looks_like_request(data[0]) else 1
        if not _looks_like_request(data[req_side]):
            continue  # starts mid-message (a capture begun mid-stream): nothing to frame from the start
        messages = [("request", msg) for msg in _frames(data[req_side])]
        responses = list(_frames(data[1 - req_side]))
        streams.append((int(m.group(1)), Stream(node[req_side], node[1 - req_side], messages + [
            ("response", r) for r in responses])))
    return [s for _, s in sorted(streams, key=lambda t: t[0])]


def _looks_like_request(buf: bytes) -> bool:
    if len(buf) < 12:
        return False
    size, api_key, version = unpack_from(">ihh", buf)
    return 8 <= size < 1 << 28 and 0 <= api_key < 100 and 0 <= version < 30


def _frames(buf: bytes):
    pos = 0
    while pos + 4 <= len(buf):
        (size,) = unpack_from(">i", buf, pos)
        if size < 0 or pos + 4 + size > len(buf):
            return  # a message cut by the end of the capture
        yield bytes(buf[pos + 4:pos + 4 + size])
        pos += 4 + size


def kafka_python_fetches(streams: list[Stream]) -> dict[tuple[str, str], list[dict]]:
    """(client, broker) -> Fetch exchanges as kafka-python decodes them, in stream order."""
    from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse

    out: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for s in streams:
        pending = {}
        order = []
        for kind, msg in s.messages:
            if kind == "request":
                api_key, version, corr = unpack_from(">hhi", msg)
                if api_key == 1:
                    pending[corr] = {"version": version, "correlation_id": corr, "request_bytes": len(msg) + 4,
                                     "request": FetchRequest.decode(msg, version=version, header=True)}
                    order.append(corr)
            else:
                (corr,) = unpack_from(">i", msg)
                if corr in pending:
                    ex = pending[corr]
                    ex["response_bytes"] = len(msg) + 4
                    ex["response"] = FetchResponse.decode(msg, version=ex["version"], header=True)
        out[(s.client, s.broker)].extend(pending[c] for c in order)
    return out
