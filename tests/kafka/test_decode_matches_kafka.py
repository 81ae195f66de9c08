"""`fetchtool decode` against Apache Kafka 4.3.1's own request log: every Fetch the broker logged is one exchange
in the decode, field by field.

The reference is kafka.request.logger (one `Completed request:{json}` line per request, with its response), read
by tests/kafka/broker_record.py; exchanges are matched by (client ip:port, correlation id). A logged Fetch is
required in the decode unless it lies outside the capture window (arrived before the first packet or completed
after the last one). Every decoded Fetch with a response must be in the log.

tshark 4.4 is the second witness, for Fetch v0-v16 only: its Kafka dissector knows no later version. The Java
client (4.3.1) speaks v18, so its exchanges are held to the request log alone; kafka-python's (v<=16) are held to
both.

Two ways in: a live run (the `kafka` fixture, tcpdump on lo around Kafka's ConsoleConsumer, ProducerPerformance
and a kafka-python consumer), and every committed captures/kafka/*.pcap with the request log recorded beside it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

import broker_record as br

ROOT = Path(__file__).resolve().parents[2]
KAFKA_CAPTURES = ROOT / "captures" / "kafka"
TSHARK_MAX_FETCH = 16  # tshark 4.4's Kafka dissector decodes Fetch up to v16
WINDOW_SLACK_S = 0.02  # log times are milliseconds of the broker's clock; the capture's are the kernel's

KAFKA = {"nodes": 1, "cache_slots": 16}


# ---------------------------------------------------------------------------------------------------------------
# fetchtool's side (its CLI, as a support engineer runs it)


def decode_jsonl(capture: Path, ports: list[int] | None = None) -> list[dict]:
    cmd = [sys.executable, "-m", "fetchtool", "decode", str(capture), "--format", "jsonl"]
    for p in ports or []:
        cmd += ["--port", str(p)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def decode_partitions(capture: Path, ports: list[int] | None = None) -> pl.DataFrame:
    with tempfile.TemporaryDirectory(prefix="fetchtool-decode-") as out:
        cmd = [sys.executable, "-m", "fetchtool", "decode", str(capture), "--out", out]
        for p in ports or []:
            cmd += ["--port", str(p)]
        subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True)
        exchanges = pl.read_parquet(Path(out) / "exchanges.parquet").select("conn", "request_frame", "client")
        parts = pl.read_parquet(Path(out) / "partitions.parquet")
    return parts.join(exchanges, on=["conn", "request_frame"], how="left")


# ---------------------------------------------------------------------------------------------------------------
# The comparison


def pcap_packets(path: Path):
    """(timestamp, link type, frame bytes) of every packet of a classic pcap (the format tcpdump -w writes)."""
    import gzip
    import struct

    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    magic = raw[:4]
    if magic not in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        return
    e = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    linktype = struct.unpack_from(e + "I", raw, 20)[0] & 0xFFFF
    off = 24
    while off + 16 <= len(raw):
        sec, frac, incl, _ = struct.unpack_from(e + "IIII", raw, off)
        yield sec + frac / (1e9 if nano else 1e6), linktype, raw[off + 16:off + 16 + incl]
        off += 16 + incl


def tcp_segments(path: Path, with_ts: bool = False):
    """(source ip:port, destination ip:port, TCP flags, seq, payload length) per IPv4 TCP segment of a pcap on an
    Ethernet or raw-IP link (what tcpdump -i lo writes), the packet's timestamp first if `with_ts`; ValueError for
    another link type."""
    import socket
    import struct

    for ts, linktype, frame in pcap_packets(path):
        if linktype == 1:
            ip = frame[14:] if frame[12:14] == b"\x08\x00" else b""
        elif linktype in (101, 228):
            ip = frame
        else:
            raise ValueError(f"link type {linktype}")
        if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 6:
            continue
        ihl = (ip[0] & 0x0F) * 4
        total = struct.unpack_from(">H", ip, 2)[0]
        tcp = ip[ihl:total]
        if len(tcp) < 20:
            continue
        src = f"{socket.inet_ntoa(ip[12:16])}:{struct.unpack_from('>H', tcp, 0)[0]}"
        dst = f"{socket.inet_ntoa(ip[16:20])}:{struct.unpack_from('>H', tcp, 2)[0]}"
        seq = struct.unpack_from(">I", tcp, 4)[0]
        payload = len(tcp) - (tcp[12] >> 4) * 4
        yield (ts, src, dst, tcp[13], seq, payload) if with_ts else (src, dst, tcp[13], seq, payload)


def closes_sent(path: Path) -> dict[str, list[float]]:
    """ip:port -> the times it sent a FIN or a RST, from the pcap's own TCP headers."""
    out: dict[str, list[float]] = {}
    for ts, src, _dst, flags, _seq, _size in tcp_segments(path, with_ts=True):
        if flags & 0x05:  # FIN or RST
            out.setdefault(src, []).append(ts)
    return out


def capture_completeness(path: Path) -> tuple[set[str], set[str]] | None:
    """From the pcap's own TCP headers: (clients whose connection opening is captured with its first bytes, i.e.
    SYN and the segment at ISN + 1 -- where a client's ApiVersions goes -- and clients with a hole in either
    direction: a segment starting beyond every byte seen so far, bytes the capture lost). None for other links."""
    try:
        segments = list(tcp_segments(path))
    except ValueError:
        return None
    isn: dict[str, int] = {}
    first_bytes: set[str] = set()
    next_seq: dict[tuple[str, str], int] = {}
    holes: set[str] = set()
    for src, dst, flags, seq, size in segments:
        if flags & 0x12 == 0x02:
            isn[src] = seq
        if size and src in isn and seq == (isn[src] + 1) % 2**32:
            first_bytes.add(src)
        key = (src, dst)
        if flags & 0x02:
            next_seq[key] = (seq + 1) % 2**32
            continue
        if key in next_seq and size:
            ahead = (seq - next_seq[key]) % 2**32
            if 0 < ahead < 2**31:
                holes.update((src, dst))
            end = (seq + size) % 2**32
            if 0 < (end - next_seq[key]) % 2**32 < 2**31:
                next_seq[key] = end
        elif size:
            next_seq[key] = (seq + size) % 2**32
    return {c for c in first_bytes if c in isn}, holes


def in_window(rec: br.FetchRecord, window: tuple[float, float]) -> bool:
    first, last = window
    return rec.received_ts >= first + WINDOW_SLACK_S and rec.ts <= last - WINDOW_SLACK_S


def row_vs_log(row: dict, rec: br.FetchRecord, software_known: bool = True) -> dict[str, tuple]:
    """field -> (fetchtool decode, Kafka's request log), for every field that differs. The response's fields are
    compared when the capture holds the response (see response_expected); the client software when the capture
    holds the connection's opening (its ApiVersions request comes right after it)."""
    v = rec.api_version
    pairs = {
        "broker": (row["broker"], rec.broker),
        "api_version": (row["api_version"], v),
        "client_id": (row["client_id"], rec.client_id),
        "replica_id": (row["replica_id"], rec.replica_id),
        "max_wait_ms": (row["max_wait_ms"], rec.max_wait_ms),
        "min_bytes": (row["min_bytes"], rec.min_bytes),
        "partitions": (row["partitions"], len(rec.partitions)),
    }
    if v >= 3:
        pairs["max_bytes"] = (row["max_bytes"], rec.max_bytes)
    if v >= 4:
        pairs["isolation_level"] = (row["isolation_level"], rec.isolation_level)
    if v >= 7:
        pairs.update({
            "session_id": (row["session_id"], rec.session_id),
            "session_epoch": (row["session_epoch"], rec.session_epoch),
            "forgotten": (row["forgotten"], len(rec.forgotten)),
        })
    if row["response_frame"] is not None:
        pairs.update({
            "response_partitions": (row["response_partitions"], len(rec.response_partitions)),
            "partition_errors": (row["partition_errors"], rec.partition_errors),
            # recordsSizeInBytes is the size of each partition's records as Kafka sent them
            "records_bytes": (row["records_bytes"], rec.records_bytes),
        })
        if v >= 1:
            pairs["throttle_time_ms"] = (row["throttle_time_ms"], rec.throttle_time_ms)
        if v >= 7:
            pairs["error_code"] = (row["error_code"], rec.error_code)
            pairs["response_session_id"] = (row["response_session_id"], rec.response_session_id)
    if rec.client_software is not None and software_known:
        pairs["client_software"] = (row["client_software"], rec.client_software)
    return {k: ab for k, ab in pairs.items() if ab[0] != ab[1]}


def partitions_vs_log(parts: pl.DataFrame, records: dict[tuple[str, int], br.FetchRecord],
                      answered: set[tuple[str, int]]) -> list[str]:
    """Per-partition comparison of decode's partitions table with the request log: which partitions each request
    named (with fetch offset and max bytes), which it forgot, and each response partition's error, high watermark
    and records size."""
    problems = []
    grouped = {k: g for k, g in parts.group_by(["client", "correlation_id"])}
    for key, rec in records.items():
        g = grouped.get((key[0], key[1]))
        mine = {"request": [], "forgotten": [], "response": []}
        if g is not None:
            for p in g.iter_rows(named=True):
                topic = p["topic_id"] if rec.api_version >= 13 else p["topic"]
                if p["entry"] == "request":
                    mine["request"].append((topic, p["partition"], p["fetch_offset"], p["partition_max_bytes"],
                                            p["current_leader_epoch"] if rec.api_version >= 9 else None))
                elif p["entry"] == "forgotten":
                    mine["forgotten"].append((topic, p["partition"]))
                else:
                    mine["response"].append((topic, p["partition"], p["error_code"], p["high_watermark"],
                                             p["records_bytes"] or 0))
        theirs = {
            "request": [(q.topic, q.partition, q.fetch_offset, q.partition_max_bytes,
                         q.current_leader_epoch if rec.api_version >= 9 else None) for q in rec.partitions],
            "forgotten": [(q.topic, q.partition) for q in rec.forgotten],
            "response": [(q.topic, q.partition, q.error_code, q.high_watermark, q.records_bytes)
                         for q in rec.response_partitions],
        }
        for entry in mine:
            if entry == "response" and key not in answered:
                continue  # the capture ends before the response (checked by the caller)
            if mine[entry] != theirs[entry]:
                problems.append(f"{key} v{rec.api_version} {entry}: decode {mine[entry]} != log {theirs[entry]}")
    return problems


def assert_decode_matches_request_log(capture: Path, fetches: list[br.FetchRecord], ports: list[int],
                                      client_gone_at=None, unlogged=None) -> dict:
    """The whole check; returns counts for the caller's own assertions. `client_gone_at(rec)`: when the record
    says the client died (a SIGKILLed node fetching as a follower), or None. `unlogged(row)`: whether a decoded
    exchange's request-log line may be lost (answered just before its broker was SIGKILLed), or None."""
    rows = [r for r in decode_jsonl(capture, ports) if r["api_key"] == 1]
    window = br.pcap_time_span(capture)
    brokers = {f"127.0.0.1:{p}" for p in ports}
    logged = {f.key: f for f in fetches if f.broker in brokers}
    decoded = {(r["client"], r["correlation_id"]): r for r in rows}
    assert len(decoded) == len(rows), "two decoded Fetch exchanges share a (client, correlation id)"

    # None lost: every Fetch the broker completed inside the capture window is decoded.
    completeness = capture_completeness(capture)
    opened, holes = completeness if completeness is not None else (set(), set())
    expected = {k for k, f in logged.items() if in_window(f, window)}
    # bytes tcpdump itself lost (the kernel drops packets under load) cannot be decoded: those connections'
    # exchanges are excused from "none lost", and only they
    excused = {k for k in expected if k[0] in holes}
    lost = sorted(expected - excused - decoded.keys(), key=lambda k: logged[k].ts)
    assert not lost, (f"{len(lost)} of {len(expected)} Fetch requests in Kafka's request log are missing from "
                      f"the decode, first: {[logged[k] for k in lost[:3]]}")
    # None invented: every decoded exchange with a response is one Kafka logged.
    invented = [r for k, r in decoded.items() if r["response_frame"] is not None and k not in logged
                and not (unlogged and unlogged(r))]
    assert not invented, f"decoded Fetch exchanges Kafka never logged: {invented[:3]}"

    both = decoded.keys() & logged.keys()
    # A response Kafka completed is on the wire unless it was sent after the capture's last packet or to a client
    # that was dead by then (Kafka logs "Completed request" for a response to a closed connection too).
    last_packet = window[1]
    no_response = [k for k in both if decoded[k]["response_frame"] is None]
    unexplained = [k for k in no_response if logged[k].ts < last_packet - WINDOW_SLACK_S
                   and not (client_gone_at and (gone := client_gone_at(logged[k])) and gone < logged[k].ts)]
    assert not unexplained, (f"{len(unexplained)} responses Kafka sent inside the capture are missing from the "
                             f"decode, first: {[logged[k] for k in unexplained[:3]]}")
    diffs = {k: d for k in both if (d := row_vs_log(decoded[k], logged[k], k[0] in opened))}
    summary = Counter(field for d in diffs.values() for field in d)
    first = {f: next((k, d[f]) for k, d in diffs.items() if f in d) for f in summary}
    assert not diffs, f"decode differs from Kafka's request log: {dict(summary)}; first of each: {first}"

    answered = {k for k in both if decoded[k]["response_frame"] is not None}
    problems = partitions_vs_log(decode_partitions(capture, ports), {k: logged[k] for k in both}, answered)
    assert not problems, f"{len(problems)} exchanges' partitions differ, first: {problems[:3]}"
    return {"compared": len(both), "versions": Counter(logged[k].api_version for k in both),
            "rows": {k: decoded[k] for k in both}, "excused": excused}


# ---------------------------------------------------------------------------------------------------------------
# tshark 4.4 as the second witness (Fetch v0-v16 only)

TSHARK_FIELDS = ["frame.number", "kafka.correlation_id", "kafka.api_version", "kafka.client_id",
                 "kafka.fetch_session_id", "kafka.fetch_session_epoch", "kafka.max_wait_time", "kafka.min_bytes",
                 "kafka.max_bytes", "kafka.isolation_level", "kafka.partition_id", "kafka.forgotten_topic_partition",
                 "kafka.error", "kafka.request_frame"]


def assert_decode_matches_tshark(capture: Path, rows: dict, port: int, tshark_fields) -> int:
    """Every decoded Fetch v<=16 exchange equals tshark's reading of the same frames. Returns how many."""
    frames = {int(r[0]): dict(zip(TSHARK_FIELDS, r)) for r in tshark_fields(capture, port, TSHARK_FIELDS)}
    compared = 0
    for row in rows.values():
        v = row["api_version"]
        if v > TSHARK_MAX_FETCH:
            continue  # tshark 4.4 cannot decode Fetch v17-v18; the request log alone is the reference there
        req = frames[row["request_frame"]]
        ints = lambda s: [int(x) for x in s.split(",") if x != ""]  # noqa: E731
        assert ints(req["kafka.correlation_id"]) == [row["correlation_id"]]
        assert ints(req["kafka.api_version"]) == [v]
        assert req["kafka.client_id"] == (row["client_id"] or "")
        assert ints(req["kafka.max_wait_time"]) == [row["max_wait_ms"]]
        assert ints(req["kafka.min_bytes"]) == [row["min_bytes"]]
        assert ints(req["kafka.max_bytes"])[:1] == ([row["max_bytes"]] if v >= 3 else ints(req["kafka.max_bytes"])[:1])
        assert len(ints(req["kafka.partition_id"])) == row["partitions"]
        if v >= 4:
            assert ints(req["kafka.isolation_level"]) == [row["isolation_level"]]
        if v >= 7:
            assert ints(req["kafka.fetch_session_id"]) == [row["session_id"]]
            assert ints(req["kafka.fetch_session_epoch"]) == [row["session_epoch"]]
            assert len(ints(req["kafka.forgotten_topic_partition"])) == row["forgotten"]
        if row["response_frame"] is not None:
            resp = frames[row["response_frame"]]
            assert ints(resp["kafka.request_frame"]) == [row["request_frame"]]
            errors = ints(resp["kafka.error"])
            assert len(ints(resp["kafka.partition_id"])) == row["response_partitions"]
            if v >= 7:
                assert errors[0] == row["error_code"]
                assert ints(resp["kafka.fetch_session_id"]) == [row["response_session_id"]]
                errors = errors[1:]
            assert sum(1 for e in errors if e) == row["partition_errors"]
        compared += 1
    return compared


# ---------------------------------------------------------------------------------------------------------------
# Live: a real broker, real clients, tcpdump on loopback


KAFKA_PYTHON_CONSUMER = """
import sys
from kafka import KafkaConsumer
c = KafkaConsumer(sys.argv[2], bootstrap_servers=sys.argv[1], group_id="kp-group", client_id="kafka-python-live",
                  auto_offset_reset="earliest", consumer_timeout_ms=int(sys.argv[3]))
n = sum(1 for _ in c)
c.close()
print(n)
"""


@pytest.fixture(scope="module")
def live_run(kafka, tmp_path_factory):
    """One recorded run: tcpdump on lo around a Java ConsoleConsumer, a kafka-python consumer and
    ProducerPerformance on a 3-partition topic; yields (capture, the node)."""
    import kafka_peer

    if not os.access("/usr/bin/tcpdump", os.X_OK):
        pytest.skip("no /usr/bin/tcpdump")
    kafka.create_topic("orders", 3)
    node = kafka.nodes[0]
    capture = tmp_path_factory.mktemp("live") / "live.pcap"
    dump = kafka_peer.LoopbackCapture(capture, [node.port]).start()
    procs = []
    try:
        procs.append(kafka_peer.start_java_tool(
            ["org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", kafka.bootstrap, "--topic",
             "orders", "--group", "java-group", "--from-beginning", "--timeout-ms", "5000"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen([sys.executable, "-c", KAFKA_PYTHON_CONSUMER, kafka.bootstrap, "orders", "5000"],
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
        time.sleep(2)
        kafka_peer.run_java_tool(["org.apache.kafka.tools.ProducerPerformance", "--topic", "orders", "--num-records",
                                  "300", "--record-size", "100", "--throughput", "150", "--producer-props",
                                  f"bootstrap.servers={kafka.bootstrap}"])
        for p in procs:
            p.wait(timeout=90)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        dump.stop()
    yield capture, node


@pytest.mark.kafka
def test_live_every_fetch_kafka_logged_is_decoded_with_the_same_fields(live_run):
    capture, node = live_run
    fetches = br.read_requests_log(node.requests_log)
    result = assert_decode_matches_request_log(capture, fetches, [node.port])
    clients = {row["client_id"] for row in result["rows"].values()}
    # Both consumers fetched through the capture: the Java one at v18, kafka-python at its own version.
    assert "console-consumer" in clients and "kafka-python-live" in clients, clients
    assert 18 in result["versions"], result["versions"]
    print("compared", result["compared"], dict(result["versions"]))


@pytest.mark.kafka
@pytest.mark.tshark
def test_live_fetches_up_to_v16_also_agree_with_tshark(live_run, tshark_fields):
    capture, node = live_run
    fetches = br.read_requests_log(node.requests_log)
    rows = {(r["client"], r["correlation_id"]): r for r in decode_jsonl(capture, [node.port]) if r["api_key"] == 1}
    old = {k: r for k, r in rows.items() if r["api_version"] <= TSHARK_MAX_FETCH}
    assert old, f"no Fetch <= v16 in the live run (versions {Counter(r['api_version'] for r in rows.values())})"
    assert assert_decode_matches_tshark(capture, old, node.port, tshark_fields) == len(old)
    # and those are the very exchanges Kafka logged
    assert old.keys() <= {f.key for f in fetches}


# ---------------------------------------------------------------------------------------------------------------
# Committed captures of real runs: captures/kafka/<name>.pcap with <name>.requests.log(.gz) and <name>.record.json


def committed_captures() -> list[Path]:
    if not KAFKA_CAPTURES.is_dir():
        return []
    return sorted(p for p in KAFKA_CAPTURES.iterdir() if p.name.endswith((".pcap", ".pcapng", ".pcap.gz"))
                  and (KAFKA_CAPTURES / (p.name.split(".pcap")[0] + ".record.json")).exists())


def committed_params():
    caps = committed_captures()
    if not caps:
        return [pytest.param(None, marks=pytest.mark.skip(reason="no captures/kafka/*.pcap committed yet"))]
    return [pytest.param(c, id=c.name) for c in caps]


def captured_ports(run: br.RecordedRun) -> list[int]:
    """The ports tcpdump captured (record.json), which are the ports the nodes logged requests on."""
    return sorted(run.meta.get("captured_ports") or {p for ports in run.node_ports.values() for p in ports})


@pytest.mark.parametrize("capture", committed_params())
def test_committed_capture_every_logged_fetch_is_decoded_with_the_same_fields(capture):
    run = br.load_run(capture)
    if not run.record.fetches:  # e.g. a share group: ShareFetch (api 78) only
        assert not [r for r in decode_jsonl(capture, captured_ports(run)) if r["api_key"] == 1], (
            "fetchtool decoded Fetch exchanges where Kafka's request log has none")
        return
    deaths = {node: killed for node, killed, _ in run.node_deaths()}
    closes = closes_sent(capture)

    def client_gone_at(rec: br.FetchRecord) -> float | None:
        if rec.replica_id >= 0:
            return deaths.get(f"node{rec.replica_id}")
        # a client that closed its connection with the fetch in flight (franz-go does on a rebalance): Kafka still
        # logs the response it then could not send
        return next((t for t in closes.get(rec.client, ()) if t >= rec.received_ts), None)

    result = assert_decode_matches_request_log(capture, run.record.fetches, captured_ports(run), client_gone_at)
    assert result["compared"] > 0


@pytest.mark.tshark
@pytest.mark.parametrize("capture", committed_params())
def test_committed_capture_fetches_up_to_v16_also_agree_with_tshark(capture, tshark_fields):
    run = br.load_run(capture)
    keys = {f.key for f in run.record.fetches}
    ports = captured_ports(run)
    rows = {(r["client"], r["correlation_id"]): r for r in decode_jsonl(capture, ports) if r["api_key"] == 1}
    old = {k: r for k, r in rows.items() if r["api_version"] <= TSHARK_MAX_FETCH}
    if not rows:
        pytest.skip(f"no Fetch in {capture.name}")
    if not old:
        pytest.skip(f"every Fetch in {capture.name} is v17+ (tshark 4.4 decodes up to v16; the request-log test "
                    f"covers them)")
    for port in ports:
        mine = {k: r for k, r in old.items() if r["broker"].endswith(f":{port}")}
        assert assert_decode_matches_tshark(capture, mine, port, tshark_fields) == len(mine)
    assert {k for k, r in old.items() if r["response_frame"] is not None} <= keys
