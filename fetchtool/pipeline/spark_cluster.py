"""A Spark standalone cluster on this machine, from the pyspark installation: `bin/spark-class`'s Master and
Workers as separate processes on 127.0.0.1 (free ports), each worker in its own directory. For tests and
benchmarks (a real cluster where executors do not share the driver's directory), and to try `--master
spark://...` without a cluster:

    cluster = StandaloneCluster(Path("/tmp/sc")); cluster.start(workers=2); cluster.wait_for_workers(2)
    ... fetchtool analyze --engine spark --master {cluster.url} ...
    cluster.stop()
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path


def spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StandaloneCluster:
    """A master and workers (`cores` and `memory` each), stopped by stop() (every process it started)."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.env = dict(os.environ, SPARK_HOME=str(spark_class().parents[1]), SPARK_LOCAL_IP="127.0.0.1",
                        SPARK_LOG_DIR=str(root / "logs"), SPARK_WORKER_DIR=str(root / "work"))
        self.port, self.ui = _free_port(), _free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []

    def start(self, workers: int = 2, cores: int = 1, memory: str = "512m") -> None:
        self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(self.ui))
        for i in range(workers):
            wdir = self.root / f"worker{i}"
            wdir.mkdir(exist_ok=True)
            # Each worker runs in its own directory: an executor that opened "rotated/x.pcap" would look there.
            self._start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                        "--port", str(_free_port()), "--webui-port", str(_free_port()), "--cores", str(cores),
                        "--memory", memory, "--work-dir", str(wdir / "work"), cwd=wdir)

    def _start(self, name: str, cls: str, *args: str, cwd: Path | None = None) -> None:
        log = self.root / f"{name}.log"
        self.logs.append(log)
        with open(log, "wb") as out:
            self.procs.append(subprocess.Popen([str(spark_class()), cls, *args], env=self.env, cwd=cwd or self.root,
                                               stdout=out, stderr=subprocess.STDOUT, start_new_session=True))

    def wait_for_workers(self, n: int, timeout: float = 120) -> None:
        """Until the master counts `n` live workers (RuntimeError with the processes' logs if not)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.ui}/json/", timeout=2) as res:
                    if json.load(res).get("aliveworkers", 0) >= n:
                        return
            except OSError:
                pass
            if any(p.poll() is not None for p in self.procs):
                break
            time.sleep(0.5)
        raise RuntimeError("the standalone cluster did not start:\n" + "\n".join(
            f"--- {log.name}\n{log.read_text(errors='replace')[-1500:]}" for log in self.logs))

    def executor_dirs(self) -> list[Path]:
        """The application directories the workers made for executors (one per executor that ran)."""
        return sorted(self.root.glob("worker*/work/app-*/*"))

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, 15)  # spark-class execs java in the session it started
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
                p.wait()
