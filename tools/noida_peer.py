"""noida-db 0.2.3 as a Kafka peer for tests and examples/make_noida_captures.py: one server process serving
Kafka only on 127.0.0.1 and a free port, its data in a folder of its own, stopped by its PID.

noida-db never creates fetch sessions and answers every Fetch at once (it ignores MaxWaitMs). Its binary comes
from tools/install_noida.sh (FETCHTOOL_NOIDA, else /opt/noida-db/noida-db); on Debian 12 it prints a GLIBC
warning on stderr and runs all the same.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time

NOIDA_DEFAULT = "/opt/noida-db/noida-db"
NOIDA_VERSION = "noida-db 0.2.3"
HOST = "127.0.0.1"


def noida_binary() -> str:
    return os.environ.get("FETCHTOOL_NOIDA") or NOIDA_DEFAULT


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class Noida:
    """A running noida-db (a context manager, or start()/stop())."""

    def __init__(self, binary: str | None = None, port: int | None = None):
        self.binary, self.port = binary or noida_binary(), port or free_port()
        self.data = tempfile.mkdtemp(prefix="noida-")
        self.command = [self.binary, "start", "--only", "kafka", "--host", HOST, "--kafka-port", str(self.port),
                        "--data-dir", self.data]
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def start(self, timeout_s: float = 15) -> Noida:
        self.proc = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                socket.create_connection((HOST, self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"noida-db did not listen on {self.bootstrap}: {' '.join(self.command)}")

    def seed(self, topic: str, partitions: int, records) -> None:
        """Create ``topic`` and produce ``records`` ((partition, key, value)) with kafka-python, before any
        capture starts. kafka-python is imported here: the rest of this module needs only the stdlib."""
        from kafka import KafkaProducer
        from kafka.admin import KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap)
        admin.create_topics([NewTopic(topic, partitions, 1)])
        admin.close()
        producer = KafkaProducer(bootstrap_servers=self.bootstrap)
        for partition, key, value in records:
            producer.send(topic, key=key, value=value, partition=partition)
        producer.flush()
        producer.close()

    def activity(self) -> str:
        """noida-db's own record of what it served (`noida-db activity`: each kind of request, not each one)."""
        return subprocess.run([self.binary, "activity", "--data-dir", self.data], capture_output=True, text=True,
                              timeout=30).stdout

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        shutil.rmtree(self.data, ignore_errors=True)

    def __enter__(self) -> Noida:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
