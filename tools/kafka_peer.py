"""Apache Kafka 4.3.1 as a test peer: KRaft nodes on loopback, the Java clients through Kafka's own tool classes.

Standard library only, shared by tests/ (fixtures) and examples/ (the scripts that remake captures/kafka/). The
jars come from tools/install_kafka.sh (FETCHTOOL_KAFKA_LIBS, else /opt/kafka431/libs). Every node logs what
fetchtool's verdicts are held to, each logger into its own file:

  sessions.log   org.apache.kafka.server.FetchSessionCacheShard (TRACE: created, refused, evicted sessions) and
                 org.apache.kafka.server.FetchManager (DEBUG: every full/incremental context, session errors)
  requests.log   kafka.request.logger (DEBUG: one JSON line per request with its response)
  server.log     everything else at INFO
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

KAFKA_VERSION = "4.3.1"
LIBS_DEFAULT = "/opt/kafka431/libs"
INSTALL_HINT = "run tools/install_kafka.sh (needs Java 17+ and Maven) or set FETCHTOOL_KAFKA_LIBS"
LOOPBACK = "127.0.0.1"

_LOG4J2 = """\
status = warn
appender.server.type = File
appender.server.name = server
appender.server.fileName = {dir}/server.log
appender.server.layout.type = PatternLayout
appender.server.layout.pattern = [%d{{ISO8601}}] %p %m (%c)%n
appender.sessions.type = File
appender.sessions.name = sessions
appender.sessions.fileName = {dir}/sessions.log
appender.sessions.layout.type = PatternLayout
appender.sessions.layout.pattern = [%d{{ISO8601}}] %p %m (%c)%n
appender.requests.type = File
appender.requests.name = requests
appender.requests.fileName = {dir}/requests.log
appender.requests.layout.type = PatternLayout
appender.requests.layout.pattern = [%d{{ISO8601}}] %m%n
rootLogger.level = INFO
rootLogger.appenderRef.server.ref = server
logger.shard.name = org.apache.kafka.server.FetchSessionCacheShard
logger.shard.level = TRACE
logger.shard.additivity = false
logger.shard.appenderRef.sessions.ref = sessions
logger.manager.name = org.apache.kafka.server.FetchManager
logger.manager.level = DEBUG
logger.manager.additivity = false
logger.manager.appenderRef.sessions.ref = sessions
logger.request.name = kafka.request.logger
logger.request.level = DEBUG
logger.request.additivity = false
logger.request.appenderRef.requests.ref = requests
"""

# Quiet client-side logging for the Java tool classes: warnings only, on stderr.
_CLIENT_LOG4J2 = """\
status = warn
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = err
"""


class KafkaUnavailable(RuntimeError):
    """Java, the jars or a node's start-up failed; the message says which and how to install."""


def libs_dir() -> Path:
    return Path(os.environ.get("FETCHTOOL_KAFKA_LIBS") or LIBS_DEFAULT)


def java() -> str:
    path = shutil.which("java")
    if path is None:
        raise KafkaUnavailable(f"no java on PATH; {INSTALL_HINT}")
    return path


def check_installed() -> Path:
    """The jar folder, or KafkaUnavailable saying what is missing."""
    java()
    libs = libs_dir()
    jar = libs / f"kafka_2.13-{KAFKA_VERSION}.jar"
    if not jar.is_file():
        raise KafkaUnavailable(f"{jar} not found; {INSTALL_HINT}")
    return libs


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def random_cluster_id() -> str:
    """Kafka's Uuid text form: base64url of 16 random bytes, unpadded; like Kafka's Uuid.randomUuid, never one
    that starts with '-', which the storage tool's command line would read as an option."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def classpath() -> str:
    return str(check_installed() / "*")


@dataclass
class KafkaNode:
    """One combined (broker + controller) KRaft node."""

    node_id: int
    port: int  # the PLAINTEXT (client) listener
    controller_port: int
    workdir: Path
    proc: subprocess.Popen | None = None
    started_s: float = 0.0  # seconds from launch to accepting on `port`

    @property
    def bootstrap(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def sessions_log(self) -> Path:
        return self.workdir / "sessions.log"

    @property
    def requests_log(self) -> Path:
        return self.workdir / "requests.log"

    @property
    def server_log(self) -> Path:
        return self.workdir / "server.log"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class KafkaCluster:
    """One node or three combined nodes on loopback, with static voters.

    `cache_slots` is max.incremental.fetch.session.cache.slots (Kafka splits it over 8 shards). `extra` adds
    broker properties. Use as a context manager, or call start()/stop().
    """

    nodes_count: int = 1
    cache_slots: int = 1000
    extra: dict[str, str] = field(default_factory=dict)
    root: Path | None = None
    nodes: list[KafkaNode] = field(default_factory=list)
    cluster_id: str = field(default_factory=random_cluster_id)
    _own_root: bool = False

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    def __enter__(self) -> KafkaCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout_s: float = 60) -> None:
        check_installed()
        if self.root is None:
            self.root = Path(tempfile.mkdtemp(prefix="fetchtool-kafka-"))
            self._own_root = True
        rf = min(3, self.nodes_count)
        self.nodes = [
            KafkaNode(i + 1, free_port(), free_port(), self.root / f"node{i + 1}") for i in range(self.nodes_count)
        ]
        voters = ",".join(f"{n.node_id}@{LOOPBACK}:{n.controller_port}" for n in self.nodes)
        for node in self.nodes:
            node.workdir.mkdir(parents=True, exist_ok=True)
            props = {
                "process.roles": "broker,controller",
                "node.id": str(node.node_id),
                "controller.quorum.voters": voters,
                "listeners": f"PLAINTEXT://{LOOPBACK}:{node.port},CONTROLLER://{LOOPBACK}:{node.controller_port}",
                "advertised.listeners": f"PLAINTEXT://{LOOPBACK}:{node.port}",
                "controller.listener.names": "CONTROLLER",
                "inter.broker.listener.name": "PLAINTEXT",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "log.dirs": str(node.workdir / "data"),
                "num.partitions": "1",
                "default.replication.factor": str(rf),
                "min.insync.replicas": "1",
                "offsets.topic.replication.factor": str(rf),
                "offsets.topic.num.partitions": "3",
                "transaction.state.log.replication.factor": str(rf),
                "transaction.state.log.min.isr": "1",
                "share.coordinator.state.topic.replication.factor": str(rf),
                "share.coordinator.state.topic.min.isr": "1",
                "group.initial.rebalance.delay.ms": "0",
                "max.incremental.fetch.session.cache.slots": str(self.cache_slots),
                "auto.create.topics.enable": "false",
            }
            props.update(self.extra)
            (node.workdir / "server.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
            (node.workdir / "log4j2.properties").write_text(_LOG4J2.format(dir=node.workdir))
            self._run_tool(
                ["kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c", str(node.workdir / "server.properties")],
                timeout_s=60,
            )
        for node in self.nodes:
            self.start_node(node, wait=False)
        deadline = time.monotonic() + timeout_s
        for node in self.nodes:
            _wait_accepting(node, deadline)

    def start_node(self, node: KafkaNode, wait: bool = True, timeout_s: float = 60) -> None:
        """(Re)starts one node on its own ports and data; its log files are appended to."""
        launched = time.monotonic()
        cmd = [
            java(),
            "-Xms128m",
            "-Xmx512m",
            "-XX:+UseG1GC",
            "-XX:TieredStopAtLevel=1",  # start-up over peak speed: tests run seconds, not hours
            f"-Dlog4j2.configurationFile={node.workdir / 'log4j2.properties'}",
            "-cp",
            classpath(),
            "kafka.Kafka",
            str(node.workdir / "server.properties"),
        ]
        out = open(node.workdir / "stdout.log", "ab")
        node.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        out.close()
        node.started_s = 0.0
        node._launched = launched  # type: ignore[attr-defined]
        if wait:
            _wait_accepting(node, time.monotonic() + timeout_s)

    def kill_node(self, node: KafkaNode, sig: int = signal.SIGKILL) -> None:
        if node.proc is not None and node.proc.poll() is None:
            node.proc.send_signal(sig)
            try:
                node.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                node.proc.kill()
                node.proc.wait()

    def stop(self) -> None:
        # Signal every node first, then wait: one by one, a 3-node cluster took ~33 s to shut down.
        for node in self.nodes:
            if node.alive:
                node.proc.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
        for node in self.nodes:
            self.kill_node(node, signal.SIGTERM)
        if self._own_root and self.root is not None and not os.environ.get("FETCHTOOL_KEEP_KAFKA"):
            shutil.rmtree(self.root, ignore_errors=True)

    def _run_tool(self, args: list[str], timeout_s: float = 120) -> str:
        return run_java_tool(args, timeout_s=timeout_s)

    # --- admin through Kafka's own tools -------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int, replication: int | None = None) -> None:
        rf = replication if replication is not None else min(3, self.nodes_count)
        run_java_tool(
            ["org.apache.kafka.tools.TopicCommand", "--bootstrap-server", self.bootstrap, "--create", "--topic", name,
             "--partitions", str(partitions), "--replication-factor", str(rf)],
            timeout_s=60,
        )
        wait_for_leaders(self.bootstrap, name)


def _wait_accepting(node: KafkaNode, deadline: float) -> None:
    while time.monotonic() < deadline:
        if node.proc is not None and node.proc.poll() is not None:
            tail = (node.workdir / "server.log").read_text(errors="replace")[-2000:] if node.server_log.exists() else ""
            raise KafkaUnavailable(f"Kafka node {node.node_id} exited {node.proc.returncode} while starting: {tail}")
        try:
            with socket.create_connection((LOOPBACK, node.port), timeout=0.5):
                node.started_s = time.monotonic() - node._launched  # type: ignore[attr-defined]
                return
        except OSError:
            time.sleep(0.1)
    raise KafkaUnavailable(f"Kafka node {node.node_id} did not listen on {node.bootstrap} in time")


def client_log4j(root: Path) -> Path:
    path = root / "client-log4j2.properties"
    if not path.exists():
        path.write_text(_CLIENT_LOG4J2)
    return path


def java_tool_cmd(args: list[str], heap: str = "256m") -> list[str]:
    cfg = client_log4j(Path(tempfile.gettempdir()))
    return [java(), f"-Xmx{heap}", "-XX:TieredStopAtLevel=1", f"-Dlog4j2.configurationFile={cfg}", "-cp",
            classpath(), *args]


def run_java_tool(args: list[str], timeout_s: float = 120) -> str:
    """Runs one of Kafka's tool classes to completion; its stdout, or KafkaUnavailable with its stderr."""
    proc = subprocess.run(java_tool_cmd(args), capture_output=True, text=True, timeout=timeout_s,
                          stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise KafkaUnavailable(f"{args[0]} exited {proc.returncode}: {(proc.stderr or proc.stdout)[-1500:]}")
    return proc.stdout


def start_java_tool(args: list[str], **popen: object) -> subprocess.Popen:
    """Starts one of Kafka's tool classes (a console consumer, a perf producer) in its own process group."""
    popen.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.Popen(java_tool_cmd(args), start_new_session=True, **popen)  # type: ignore[arg-type]


def wait_for_leaders(bootstrap: str, topic: str, timeout_s: float = 30) -> None:
    """Waits until every partition of `topic` has a leader in Kafka's own describe output."""
    deadline = time.monotonic() + timeout_s
    while True:
        out = run_java_tool(["org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap, "--describe",
                             "--topic", topic], timeout_s=60)
        rows = [line for line in out.splitlines() if "\tPartition:" in line or " Partition: " in line]
        if rows and all("Leader: none" not in r and "Leader: -1" not in r for r in rows):
            return
        if time.monotonic() > deadline:
            raise KafkaUnavailable(f"topic {topic} has partitions without a leader: {out}")
        time.sleep(0.3)


class LoopbackCapture:
    """tcpdump on lo for the given ports (a context manager, or start()/stop()): the file is complete once stopped.

    Started synchronously (tcpdump says "listening on" once packets are being captured), stopped with SIGTERM
    after a short grace so the last segments are flushed (-U writes each packet as it comes).
    """

    def __init__(self, path: Path, ports: list[int], tcpdump: str = "/usr/bin/tcpdump"):
        self.path, self.ports, self.tcpdump = Path(path), list(ports), tcpdump
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> LoopbackCapture:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> LoopbackCapture:
        if not os.access(self.tcpdump, os.X_OK):
            raise KafkaUnavailable(f"no tcpdump at {self.tcpdump} (apt-get install tcpdump)")
        flt = "tcp and (" + " or ".join(f"port {p}" for p in self.ports) + ")"
        # --immediate-mode: libpcap's block buffering otherwise loses the last second when tcpdump is stopped.
        self.proc = subprocess.Popen([self.tcpdump, "-i", "lo", "-n", "-s", "0", "-U", "--immediate-mode", "-B",
                                      "32768", "-Z", "root", "-w",
                                      str(self.path), flt], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        line = self.proc.stderr.readline() if self.proc.stderr else ""
        if "listening on" not in line:
            self.proc.kill()
            raise KafkaUnavailable(f"tcpdump did not start: {line.strip()}")
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            time.sleep(0.3)
            self.proc.terminate()
            self.proc.wait(timeout=30)
