"""Remake captures/: real Kafka clients fetching from a real third-party broker (tansu), recorded with tcpdump.

    python examples/make_captures.py            (needs root for tcpdump; tansu and tcpdump installed)

For each capture: start a fresh tansu broker (memory storage) on 127.0.0.1, create a topic, produce a fixed set
of small records with kafka-python (not captured), then run tcpdump on lo filtered to the broker's port while one
consumer client reads every record back and keeps polling briefly, close the client, stop tcpdump by its PID.
Afterwards each capture is checked with tshark 4.4 (if present): the Fetch versions, session ids and epochs it
sees go into captures/manifest.json and captures/README.md, both written by this script.

Peers: FETCHTOOL_TANSU (else /opt/tansu/tansu, else PATH), FETCHTOOL_TSHARK (else /opt/tshark44/tshark),
tcpdump on PATH. See tools/install_tansu.sh and tools/install_tshark44.sh.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
TOPIC = "orders"
PARTITIONS = 3
RECORDS_PER_PARTITION = 8
BASE_TIMESTAMP_MS = 1_764_000_000_000  # fixed, so the records are identical on every remake
MAX_BYTES = 2 * 1024 * 1024


# ---------------------------------------------------------------------------------------------------------------
# The known records


def known_records() -> list[dict]:
    """The records every capture's consumer reads back: varied enough to exercise a record decoder.

    Per partition: plain key/value records, one with headers, one with a null key, one tombstone (null value),
    and a second producer batch compressed with gzip.
    """
    records = []
    for p in range(PARTITIONS):
        for i in range(RECORDS_PER_PARTITION):
            key = None if i == 2 else f"order-{p}-{i}".encode()
            value = None if i == 5 else f'{{"order": {p * 100 + i}, "qty": {i + 1}}}'.encode()
            headers = [("source", b"make_captures"), ("seq", str(i).encode())] if i == 3 else []
            records.append({
                "partition": p, "key": key, "value": value, "headers": headers,
                "timestamp_ms": BASE_TIMESTAMP_MS + p * 1000 + i,
                "compression": "gzip" if i >= RECORDS_PER_PARTITION // 2 else None,
            })
    return records


def produce(bootstrap: str) -> None:
    from kafka import KafkaProducer

    records = known_records()
    for compression in (None, "gzip"):  # two producers -> at least two record batches per partition
        producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=compression, linger_ms=50,
                                 request_timeout_ms=10_000)
        for r in records:
            if r["compression"] == compression:
                producer.send(TOPIC, key=r["key"], value=r["value"], headers=r["headers"], partition=r["partition"],
                              timestamp_ms=r["timestamp_ms"])
        producer.flush(timeout=15)
        producer.close(timeout=5)


# ---------------------------------------------------------------------------------------------------------------
# Consumers: each reads all records from an explicit assignment (no consumer group), then polls a bit more.


def consume_kafka_python(bootstrap: str, extra_s: float, tweak: dict) -> int:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", client_id="fetchtool-captures-kafka-python",
                             request_timeout_ms=10_000, **tweak)
    try:
        consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        return _drain(lambda: sum(len(v) for v in consumer.poll(timeout_ms=200).values()), extra_s)
    finally:
        consumer.close()


def consume_confluent_kafka(bootstrap: str, extra_s: float, tweak: dict) -> int:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fetchtool-captures",
                         "enable.auto.commit": False, "client.id": "fetchtool-captures-confluent-kafka",
                         "fetch.wait.max.ms": 500, **tweak})
    try:
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])

        def poll() -> int:
            msgs = consumer.consume(num_messages=100, timeout=0.2)
            errors = [m.error() for m in msgs if m.error()]
            if errors:
                raise RuntimeError(f"confluent-kafka consumer error: {errors[0]}")
            return len(msgs)

        return _drain(poll, extra_s)
    finally:
        consumer.close()


def consume_aiokafka(bootstrap: str, extra_s: float, tweak: dict) -> int:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> int:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                    auto_offset_reset="earliest", client_id="fetchtool-captures-aiokafka",
                                    request_timeout_ms=10_000, **tweak)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
            total, quiet_until = 0, None
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=200)
                total += sum(len(v) for v in batch.values())
                if total >= len(known_records()) and quiet_until is None:
                    quiet_until = time.monotonic() + extra_s
                if quiet_until is not None and time.monotonic() >= quiet_until:
                    break
            return total
        finally:
            await consumer.stop()

    return asyncio.run(run())


def _drain(poll, extra_s: float) -> int:
    """Poll until every known record has arrived, then `extra_s` more seconds (empty fetches at the tail)."""
    want = len(known_records())
    total, quiet_until = 0, None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        total += poll()
        if total >= want and quiet_until is None:
            quiet_until = time.monotonic() + extra_s
        if quiet_until is not None and time.monotonic() >= quiet_until:
            break
    return total


CLIENTS = {
    "kafka-python": ("kafka-python", consume_kafka_python),
    "confluent-kafka": ("confluent-kafka", consume_confluent_kafka),
    "aiokafka": ("aiokafka", consume_aiokafka),
}


@dataclass
class Spec:
    file: str
    client: str
    port: int | None  # None: a free port
    nano_pcapng: bool = False
    tweak: dict = field(default_factory=dict)
    extra_s: float = 2.0
    what: str = ""


SPECS = [
    Spec("kafka-python-tansu.pcap", "kafka-python", 9092,
         what="kafka-python with default limits on the default port 9092"),
    Spec("confluent-kafka-tansu.pcap", "confluent-kafka", None,
         what="librdkafka with default limits on a non-default port; librdkafka also sends "
              "GetTelemetrySubscriptions (API key 71), which tshark 4.4 does not know and marks malformed"),
    Spec("aiokafka-tansu.pcap", "aiokafka", None,
         what="aiokafka with default limits on a non-default port"),
    # KIP-74 limits small enough that the records arrive over several fetches, with truncated partial batches.
    Spec("kafka-python-limits-tansu.pcapng", "kafka-python", None, nano_pcapng=True,
         tweak={"fetch_max_bytes": 300, "max_partition_fetch_bytes": 200},
         what="kafka-python with fetch_max_bytes=300, max_partition_fetch_bytes=200 (KIP-74 limits), "
              "pcapng with nanosecond timestamps, non-default port"),
]


# ---------------------------------------------------------------------------------------------------------------
# Peers: tansu and tcpdump


def find_tansu() -> str:
    for candidate in (os.environ.get("FETCHTOOL_TANSU"), "/opt/tansu/tansu", shutil.which("tansu")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    sys.exit("make_captures: tansu not found (set FETCHTOOL_TANSU or run tools/install_tansu.sh)")


def find_tshark() -> str | None:
    path = os.environ.get("FETCHTOOL_TSHARK") or "/opt/tshark44/tshark"
    return path if os.access(path, os.X_OK) else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((HOST, port))
            return True
        except OSError:
            return False


def wait_accepting(port: int, proc: subprocess.Popen, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection((HOST, port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"tansu did not start accepting on {HOST}:{port}")


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, grace: float = 6) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def tansu_version(tansu: str) -> str:
    return subprocess.run([tansu, "--version"], capture_output=True, text=True, check=True).stdout.split()[-1]


def tcpdump_version() -> str:
    out = subprocess.run(["tcpdump", "--version"], capture_output=True, text=True).stdout
    return out.splitlines()[0].split()[-1] if out else "?"


# ---------------------------------------------------------------------------------------------------------------
# One capture


def make_capture(spec: Spec, tansu: str, tshark: str | None, out_dir: Path) -> dict:
    port = spec.port or free_port()
    if spec.port and not port_is_free(port):
        raise RuntimeError(f"port {port} is in use on {HOST}; {spec.file} must be made on it")
    url = f"tcp://{HOST}:{port}"
    bootstrap = f"{HOST}:{port}"
    broker_cmd = [tansu, "broker", "--listener-url", url, "--advertised-listener-url", url,
                  "--storage-engine", "memory://tansu/", "--silent"]
    broker = subprocess.Popen(broker_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_accepting(port, broker)
        subprocess.run([tansu, "topic", "create", "--broker", url, "--partitions", str(PARTITIONS), TOPIC],
                       check=True, capture_output=True, timeout=30)
        produce(bootstrap)

        with tempfile.TemporaryDirectory() as tmp:
            raw = Path(tmp) / "raw.pcap"
            dump_cmd = ["tcpdump", "-i", "lo", "-n", "-U", "-s", "0", "-w", str(raw)]
            if spec.nano_pcapng:
                dump_cmd[1:1] = ["--time-stamp-precision", "nano"]
            dump_cmd.append(f"tcp port {port}")
            dump = subprocess.Popen(dump_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            _wait_listening(dump)
            try:
                package, consume = CLIENTS[spec.client]
                got = consume(bootstrap, spec.extra_s, spec.tweak)
                time.sleep(0.5)  # let the FIN/ACKs of the close reach the capture
            finally:
                stop(dump, signal.SIGINT)
            if got < len(known_records()):
                raise RuntimeError(f"{spec.client} read {got} of {len(known_records())} records")

            target = out_dir / spec.file
            if spec.nano_pcapng:
                _to_pcapng(tshark, raw, target, comment=f"{package} {version(package)} fetching from tansu "
                                                         f"{tansu_version(tansu)} on {bootstrap}")
            else:
                shutil.copyfile(raw, target)
    finally:
        stop(broker)

    size = target.stat().st_size
    if size > MAX_BYTES:
        raise RuntimeError(f"{target} is {size} bytes, over the {MAX_BYTES} limit")
    entry = {
        "file": spec.file, "client": spec.client, "client_version": version(package),
        "broker": "tansu", "broker_version": tansu_version(tansu), "broker_host": HOST, "broker_port": port,
        "topic": TOPIC, "partitions": PARTITIONS, "records": len(known_records()), "records_read": got,
        "client_settings": spec.tweak,
        "format": "pcapng (nanosecond timestamps)" if spec.nano_pcapng else "pcap (microsecond timestamps)",
        "bytes": size, "what": spec.what,
        "tcpdump": " ".join(dump_cmd[:-2] + ["FILE", dump_cmd[-1]]),
    }
    if spec.client == "confluent-kafka":
        import confluent_kafka

        entry["librdkafka_version"] = confluent_kafka.libversion()[0]
    if tshark:
        entry.update(summarise(tshark, target, port))
    return entry


def _wait_listening(dump: subprocess.Popen) -> None:
    """tcpdump prints 'listening on lo' on stderr once its capture is armed."""
    assert dump.stderr is not None
    line = dump.stderr.readline()
    if "listening on" not in line:
        stop(dump)
        raise RuntimeError(f"tcpdump failed to start: {line.strip()} {dump.stderr.read().strip()}")


def _to_pcapng(tshark: str | None, raw: Path, target: Path, comment: str) -> None:
    """Rewrite tcpdump's nanosecond pcap as pcapng with tshark (tcpdump itself only writes pcap)."""
    if tshark is None:
        raise RuntimeError("tshark 4.4 is needed to write the pcapng capture (tools/install_tshark44.sh)")
    with open(target, "wb") as out:
        subprocess.run([tshark, "-r", str(raw), "-F", "pcapng", "--capture-comment", comment, "-w", "-"],
                       stdout=out, stderr=subprocess.DEVNULL, check=True, timeout=120)


# ---------------------------------------------------------------------------------------------------------------
# Checking a capture with tshark 4.4


def tshark_rows(tshark: str, capture: Path, port: int, fields: list[str], display_filter: str) -> list[list[str]]:
    cmd = [tshark, "-n", "-r", str(capture), "-d", f"tcp.port=={port},kafka", "-Y", display_filter,
           "-T", "fields", "-E", "separator=/t", "-E", "occurrence=f"]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120).stdout
    return [line.split("\t") for line in out.splitlines()]


def summarise(tshark: str, capture: Path, port: int) -> dict:
    """Kafka API keys/versions, Fetch request/response counts and the session ids/epochs tshark decodes."""
    rows = tshark_rows(tshark, capture, port,
                       ["frame.number", "tcp.dstport", "kafka.api_key", "kafka.api_version",
                        "kafka.fetch_session_id", "kafka.fetch_session_epoch", "kafka.request_frame"], "kafka")
    packets = len(subprocess.run([tshark, "-n", "-r", str(capture), "-T", "fields", "-e", "frame.number"],
                                 capture_output=True, text=True, check=True).stdout.split())
    apis: collections.Counter = collections.Counter()
    fetch_req_sessions: collections.Counter = collections.Counter()
    fetch_resp_sessions: collections.Counter = collections.Counter()
    fetch_versions = set()
    fetch_request_frames, answered = set(), set()
    for row in rows:
        frame, dstport, key, ver, sid, epoch, request_frame = (row + [""] * 7)[:7]
        direction = "request" if dstport == str(port) else "response"
        apis[(key, ver, direction)] += 1  # tshark gives the version on requests only
        if key == "1":
            if direction == "request":
                fetch_versions.add(int(ver))
                fetch_request_frames.add(int(frame))
                fetch_req_sessions[f"session_id={sid or '-'} epoch={epoch or '-'}"] += 1
            else:
                answered.add(int(request_frame))
                fetch_resp_sessions[f"session_id={sid or '-'}"] += 1
    return {
        "packets": packets,
        "fetch_versions": sorted(fetch_versions),
        "fetch_requests": sum(n for (k, _, d), n in apis.items() if k == "1" and d == "request"),
        "fetch_responses": sum(n for (k, _, d), n in apis.items() if k == "1" and d == "response"),
        "fetch_requests_unanswered": sorted(fetch_request_frames - answered),
        "fetch_request_sessions": dict(fetch_req_sessions),
        "fetch_response_sessions": dict(fetch_resp_sessions),
        "kafka_apis_seen": sorted({f"{k} v{v}" for (k, v, d) in apis if d == "request"}, key=lambda s: (int(s.split()[0]), s)),
        "checked_with": "tshark " + subprocess.run([tshark, "--version"], capture_output=True, text=True)
        .stdout.split()[2].rstrip("."),
    }


# ---------------------------------------------------------------------------------------------------------------
# README


README_HEAD = """\
# Captures

Real Kafka Fetch traffic: real clients fetching from a real third-party broker, **tansu {tansu}**
(a Kafka-compatible broker in Rust, installed by `tools/install_tansu.sh`), recorded on the loopback interface with
tcpdump {tcpdump}. Each capture has its own fresh broker (memory storage) on 127.0.0.1, a topic `{topic}` with
{partitions} partitions and the same {records} known records, produced beforehand with kafka-python (production is
not in the captures). Per partition: key/value records, one with two headers, one with a null key, one tombstone
(null value); two record batches, the second gzip-compressed. Each consumer uses an explicit assignment (no
group membership; librdkafka still looks up a group coordinator), reads everything from offset 0, keeps polling
for about two seconds (empty fetches that wait MaxWaitMs), then closes.

This file covers the real captures at the top level only; `scenarios/` holds synthetic captures made by
fetchtool's own scenario generator and has its own README.

tansu never grants fetch sessions: every Fetch response carries SessionId 0, so no capture here shows an
incremental session; the session-capable kafka-python keeps sending full fetches.

Remake them (root, for tcpdump; ~15 s): `python examples/make_captures.py`. It also rewrites this file and
`manifest.json` (machine-readable: client and versions, broker port, Fetch versions, counts) and
`records.json` (the 24 records with their offsets, keys, values, headers, timestamps and batch compression). Fetch versions and
session fields below were read back with {checked_with}:
`tshark -r F -d tcp.port==PORT,kafka -Y kafka -T fields -e tcp.dstport -e kafka.api_key -e kafka.api_version
-e kafka.fetch_session_id -e kafka.fetch_session_epoch`.

| capture | client | broker port | Fetch version | Fetch req/resp | request (session id, epoch) | size |
|---|---|---|---|---|---|---|
"""


def _unanswered(e: dict) -> str:
    frames = e.get("fetch_requests_unanswered")
    if not frames:
        return ""
    return (f" Unanswered Fetch request(s) in frame(s) {', '.join(map(str, frames))}: the client closed the connection"
            f" while tansu was holding the fetch for MaxWaitMs.")


def write_records(out_dir: Path) -> None:
    """records.json: the records every capture's consumer read back, in offset order per partition."""
    def text(b):
        return None if b is None else b.decode()

    rows, next_offset = [], collections.Counter()
    for compression in (None, "gzip"):  # the order they were produced in
        for r in known_records():
            if r["compression"] == compression:
                rows.append({"topic": TOPIC, "partition": r["partition"], "offset": next_offset[r["partition"]],
                             "key": text(r["key"]), "value": text(r["value"]),
                             "headers": [[k, text(v)] for k, v in r["headers"]],
                             "timestamp_ms": r["timestamp_ms"], "compression": r["compression"] or "none"})
                next_offset[r["partition"]] += 1
    rows.sort(key=lambda r: (r["partition"], r["offset"]))
    (out_dir / "records.json").write_text(json.dumps(rows, indent=1) + "\n")


def write_readme(entries: list[dict], out_dir: Path) -> None:
    first = entries[0]
    text = README_HEAD.format(tansu=first["broker_version"], tcpdump=tcpdump_version(), topic=TOPIC,
                              partitions=PARTITIONS, records=first["records"],
                              checked_with=first.get("checked_with", "tshark (not available at remake)"))
    for e in entries:
        client = f"{e['client']} {e['client_version']}"
        if "librdkafka_version" in e:
            client += f" (librdkafka {e['librdkafka_version']})"
        versions = ", ".join(f"v{v}" for v in e.get("fetch_versions", [])) or "?"
        sessions = "; ".join(f"{k.replace('session_id=', '(').replace(' epoch=', ', ')}) x{n}"
                             for k, n in e.get("fetch_request_sessions", {}).items()) or "?"
        text += (f"| `{e['file']}` | {client} | {e['broker_port']} | {versions} | "
                 f"{e.get('fetch_requests', '?')}/{e.get('fetch_responses', '?')} | {sessions} | "
                 f"{e['bytes']:,} B |\n")
    text += "\nHow each was made:\n\n"
    for e in entries:
        settings = ", ".join(f"{k}={v}" for k, v in e["client_settings"].items()) or "default fetch settings"
        apis = ", ".join(e.get("kafka_apis_seen", []))
        text += (f"- `{e['file']}`: {e['what']}. {e['client']} {e['client_version']} ({settings}) against tansu "
                 f"{e['broker_version']} at {e['broker_host']}:{e['broker_port']}; {e['format']}, "
                 f"{e.get('packets', '?')} packets; `{e['tcpdump']}`. Kafka API key/versions seen: {apis}. "
                 f"Fetch responses: {', '.join(f'{k} x{n}' for k, n in e.get('fetch_response_sessions', {}).items())}."
                 f"{_unanswered(e)}\n")
    (out_dir / "README.md").write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "captures", help="directory for the captures")
    parser.add_argument("--only", nargs="*", help="capture file names to remake (default: all)")
    parser.add_argument("--readme-only", action="store_true", help="only rewrite README.md from manifest.json")
    args = parser.parse_args()
    if args.readme_only:
        write_readme(json.loads((args.out / "manifest.json").read_text()), args.out)
        write_records(args.out)
        return
    if shutil.which("tcpdump") is None:
        sys.exit("make_captures: tcpdump not found (apt-get install tcpdump)")
    tansu, tshark = find_tansu(), find_tshark()
    if tshark is None:
        print("make_captures: tshark 4.4 not found; captures are not checked and the pcapng is skipped",
              file=sys.stderr)
    args.out.mkdir(parents=True, exist_ok=True)
    manifest_path = args.out / "manifest.json"
    old = {e["file"]: e for e in json.loads(manifest_path.read_text())} if manifest_path.exists() else {}
    entries = []
    for spec in SPECS:
        if (args.only and spec.file not in args.only) or (spec.nano_pcapng and tshark is None):
            if spec.file in old:
                entries.append(old[spec.file])
            continue
        print(f"make_captures: {spec.file} ...", file=sys.stderr, flush=True)
        entry = make_capture(spec, tansu, tshark, args.out)
        print(f"  {entry['bytes']:,} bytes, port {entry['broker_port']}, Fetch {entry.get('fetch_versions')}, "
              f"requests {entry.get('fetch_request_sessions')}", file=sys.stderr)
        entries.append(entry)
    manifest_path.write_text(json.dumps(entries, indent=2) + "\n")
    write_readme(entries, args.out)
    write_records(args.out)


if __name__ == "__main__":
    main()
