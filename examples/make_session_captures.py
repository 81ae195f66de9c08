"""Make captures/scenarios-real/: kafka-python (a real KIP-227 client) in REAL incremental fetch sessions.

    python examples/make_session_captures.py          (needs root for tcpdump)

tansu, the third-party broker behind captures/, never grants fetch sessions, so those captures hold only full
fetches. `fetchtool broker` does grant them (its Fetch goes through fetchtool's copy of Kafka's session engine),
so here it is the broker and kafka-python 3.0.12 both produces (default producer settings) and consumes (manual
assignment). For each scenario: start `fetchtool broker` on 127.0.0.1 (free port), start tcpdump on lo filtered to
that port, run the producer and consumers, inject the scenario's fault, stop tcpdump and the broker by PID.

Next to each capture the script writes what it did and what the broker said, independently of `fetchtool analyze`:
  <name>.broker.log   the broker's stderr (sessions created/evicted, errors, admin actions)
  <name>.record.json  port, client ids, records produced and read, fault time(s), and the broker log parsed
                      (session ids created, evicted, errors with their client/session/epoch)
tests/analysis_real/ checks `fetchtool analyze` against these records.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

from make_captures import free_port, stop  # the sibling script's; stop: SIGTERM, then SIGKILL after a grace period

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "captures" / "scenarios-real"
HOST = "127.0.0.1"
TOPIC = "orders"
PARTITIONS = 3
MAX_BYTES = 200 * 1024
TCPDUMP = ["tcpdump", "-i", "lo", "-n", "-U", "--immediate-mode", "-B", "32768", "-s", "0", "-w"]


@dataclass
class Scenario:
    file: str
    what: str
    consumers: int = 1
    broker_args: list[str] = field(default_factory=list)
    duration_s: float = 4.0
    drop_at_s: float | None = None  # SIGUSR1 (drop all sessions) this long after the consumers started
    stagger_s: float = 0.0  # start consumer i this much after consumer i-1
    assigned: list[int] | None = None  # partitions per consumer (default: all PARTITIONS for each)


SCENARIOS = [
    Scenario("kafka-python-sessions.pcap",
             "one consumer on 3 partitions; the broker grants a session on the first full fetch (session id 0, "
             "epoch 0) and every later fetch is incremental with the epoch rising by one, while a producer adds a "
             "record to each partition every 0.5 s",
             duration_s=4.0),
    Scenario("kafka-python-session-drop.pcap",
             "as kafka-python-sessions.pcap, but midway the broker gets SIGUSR1 and forgets every fetch session "
             "(as after a restart); the client's next incremental fetch is answered FETCH_SESSION_ID_NOT_FOUND (70) "
             "and the client starts over with a full fetch that creates a new session",
             duration_s=5.0, drop_at_s=2.5),
    # Kafka's cache lets a consumer's new session evict a live one only if it has MORE partitions and the old one
    # was created more than evictionMs ago (as of its last use). So the consumers fetch 1, 2 and 3 partitions,
    # start 1.5 s apart, and evictionMs is 1 s: each newcomer evicts the previous session, and an evicted
    # consumer's new, smaller session is refused (its full fetches are answered with session id 0).
    Scenario("kafka-python-cache-full.pcap",
             "three consumers (one connection each) fetching 1, 2 and 3 partitions, started 1.5 s apart, against a "
             "broker whose session cache holds ONE session (--cache-slots 1 --cache-shards 1 --eviction-ms 1000)",
             consumers=3, broker_args=["--cache-slots", "1", "--cache-shards", "1", "--eviction-ms", "1000"],
             duration_s=3.0, stagger_s=1.5, assigned=[1, 2, 3]),
]


# ---------------------------------------------------------------------------------------------------------------
# Processes (each stopped by its own PID)


def start_broker(extra: list[str], log_path: Path) -> tuple[subprocess.Popen, int, list[str]]:
    port = free_port()  # the broker advertises the port it was given
    cmd = ["fetchtool", "broker", "--host", HOST, "--port", str(port), "--topic", f"{TOPIC}:{PARTITIONS}",
           "--admin-port", "0", *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(log_path, "w"), text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("listening on"):
        stop(proc)
        raise RuntimeError(f"fetchtool broker did not start: {line!r}; see {log_path}")
    return proc, port, cmd


def start_tcpdump(path: Path, port: int) -> tuple[subprocess.Popen, list[str]]:
    cmd = TCPDUMP + [str(path), f"tcp port {port}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    line = proc.stderr.readline()  # "listening on lo ..." once the capture is armed
    if "listening on" not in line:
        stop(proc)
        raise RuntimeError(f"tcpdump failed to start: {line.strip()}")
    return proc, cmd


def broker_history(log_path: Path) -> list[dict]:
    """Every Fetch the broker answered, as it saw it (admin `history`; the admin port is on its log)."""
    m = re.search(r"admin protocol on 127\.0\.0\.1:(\d+)", log_path.read_text())
    if not m:
        raise RuntimeError(f"no admin port in {log_path}")
    with socket.create_connection((HOST, int(m[1])), timeout=5) as s:
        s.sendall(b"history 10000\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return json.loads(data)["history"]


# ---------------------------------------------------------------------------------------------------------------
# Clients


def run_producer(bootstrap: str, stop_flag: threading.Event, produced: list) -> None:
    """Default kafka-python producer: one record per partition at once, then one per partition every 0.5 s."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="fetchtool-producer")
    n = 0
    try:
        while True:
            for p in range(PARTITIONS):
                value = f'{{"order": {n}, "partition": {p}}}'.encode()
                meta = producer.send(TOPIC, key=f"order-{n}".encode(), value=value, partition=p).get(timeout=10)
                produced.append({"partition": p, "offset": meta.offset, "time": time.time()})
            n += 1
            if stop_flag.wait(0.5):
                break
        producer.flush(timeout=10)
    finally:
        producer.close(timeout=5)


def run_consumer(bootstrap: str, client_id: str, partitions: int, until: float, read: dict) -> None:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", client_id=client_id, request_timeout_ms=10_000)
    try:
        consumer.assign([TopicPartition(TOPIC, p) for p in range(partitions)])
        while time.time() < until:
            for tp, msgs in consumer.poll(timeout_ms=200).items():
                read[client_id] = read.get(client_id, 0) + len(msgs)
    finally:
        consumer.close()


# ---------------------------------------------------------------------------------------------------------------
# The broker's log, parsed (the record tests compare analyze against)

CREATED = re.compile(r"fetch session created: .*?session_id=(\d+)")
EVICTED = re.compile(r"fetch session (evicted|removed): .*?session_id=(\d+)(?:.*? reason=(\S+))?(?:.*? evicted_by=(\d+))?")
ERROR = re.compile(r"fetch session error (\d+) (\S+): client=(\S+) client_id=(\S+) session=(-?\d+) epoch=(-?\d+) v(\d+)")
DROPPED = re.compile(r"admin: dropped all (\d+) fetch sessions")


def parse_broker_log(text: str) -> dict:
    out: dict = {"created": [], "evicted": [], "errors": [], "dropped": []}
    for line in text.splitlines():
        if m := CREATED.search(line):
            out["created"].append({"session_id": int(m[1]), "line": line})
        elif m := EVICTED.search(line):
            out["evicted"].append({"session_id": int(m[2]), "how": m[1], "reason": m[3],
                                   "evicted_by": int(m[4]) if m[4] else None, "line": line})
        elif m := ERROR.search(line):
            out["errors"].append({"code": int(m[1]), "name": m[2], "client": m[3], "client_id": m[4],
                                  "session_id": int(m[5]), "epoch": int(m[6]), "version": int(m[7])})
        elif m := DROPPED.search(line):
            out["dropped"].append(int(m[1]))
    return out


# ---------------------------------------------------------------------------------------------------------------
# One capture


def make(s: Scenario, out: Path) -> dict:
    pcap, log_path = out / s.file, out / (Path(s.file).stem + ".broker.log")
    broker, port, broker_cmd = start_broker(s.broker_args, log_path)
    bootstrap = f"{HOST}:{port}"
    produced: list = []
    read: dict = {}
    faults: list = []
    try:
        dump, dump_cmd = start_tcpdump(pcap, port)
        try:
            stop_flag = threading.Event()
            producer = threading.Thread(target=run_producer, args=(bootstrap, stop_flag, produced))
            producer.start()
            time.sleep(0.5)  # the first records exist before the first fetch
            start = time.time()
            until = start + s.duration_s + s.stagger_s * (s.consumers - 1)
            client_ids = [f"fetchtool-kafka-python-{i + 1}" for i in range(s.consumers)]
            threads = []
            assigned = s.assigned or [PARTITIONS] * s.consumers
            for cid, n in zip(client_ids, assigned):
                t = threading.Thread(target=run_consumer, args=(bootstrap, cid, n, until, read))
                t.start()
                threads.append(t)
                time.sleep(s.stagger_s)
            if s.drop_at_s is not None:
                time.sleep(max(0.0, start + s.drop_at_s - time.time()))
                faults.append({"signal": "SIGUSR1", "action": "drop all fetch sessions", "time": time.time()})
                os.kill(broker.pid, signal.SIGUSR1)
            for t in threads:
                t.join()
            stop_flag.set()
            producer.join()
            time.sleep(0.5)  # the FIN/ACKs of the closes reach the capture
        finally:
            stop(dump, signal.SIGINT)
        history = broker_history(log_path)  # after tcpdump stopped: the admin port is not the captured one
    finally:
        stop(broker)
    size = pcap.stat().st_size
    if size > MAX_BYTES:
        raise RuntimeError(f"{pcap} is {size} bytes, over {MAX_BYTES}")
    log = parse_broker_log(log_path.read_text())
    record = {
        "file": s.file, "what": s.what, "bytes": size,
        "kafka_python": version("kafka-python"), "fetchtool": version("fetchtool"),
        "broker_command": " ".join(broker_cmd), "broker": f"{HOST}:{port}", "broker_port": port,
        "tcpdump": " ".join(dump_cmd[:-2] + ["FILE", dump_cmd[-1]]),
        "topic": TOPIC, "partitions": PARTITIONS, "client_ids": client_ids,
        "assigned_partitions": dict(zip(client_ids, assigned)),
        "consumer_start_time": start, "consumer_stop_time": until,
        "records_produced": len(produced), "records_read": read, "faults": faults, "broker_log": log,
        "broker_fetch_history": history,
    }
    (out / (Path(s.file).stem + ".record.json")).write_text(json.dumps(record, indent=1) + "\n")
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--only", nargs="*", help="capture file names to remake (default: all)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("make_session_captures: tcpdump needs root")
    args.out.mkdir(parents=True, exist_ok=True)
    for s in SCENARIOS:
        if args.only and s.file not in args.only:
            continue
        print(f"make_session_captures: {s.file} ...", file=sys.stderr, flush=True)
        r = make(s, args.out)
        log = r["broker_log"]
        print(f"  {r['bytes']:,} bytes, port {r['broker_port']}, produced {r['records_produced']}, read "
              f"{r['records_read']}, sessions created {[c['session_id'] for c in log['created']]}, evicted "
              f"{[e['session_id'] for e in log['evicted']]}, errors {[(e['code'], e['session_id'], e['epoch']) for e in log['errors']]}",
              file=sys.stderr)


if __name__ == "__main__":
    main()
