"""A real Spark standalone cluster: a master and two workers started from the pyspark installation's
bin/spark-class as separate processes on 127.0.0.1, and `fetchtool analyze --engine spark --master spark://...`
run from the shell on a rotated capture set named by the relative paths a user types. The executors run in
their workers' directories, not the user's: the report must still equal the embedded engine's byte for byte."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from capture_files import split_pcap
from conftest import free_port

pytestmark = [pytest.mark.spark, pytest.mark.slow]

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
FETCHTOOL = [shutil.which("fetchtool")] if shutil.which("fetchtool") else [sys.executable, "-m", "fetchtool"]


def _spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


class StandaloneCluster:
    """`spark-class ...Master` and two `...Worker`s, one core and 512 MB each, stopped by stop()."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True)
        self.env = dict(os.environ, SPARK_HOME=str(_spark_class().parents[1]), SPARK_LOCAL_IP="127.0.0.1",
                        SPARK_LOG_DIR=str(root / "logs"), SPARK_WORKER_DIR=str(root / "work"))
        self.port, self.ui = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []

    def start(self, workers: int = 2) -> None:
        self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(self.ui))
        for i in range(workers):
            wdir = self.root / f"worker{i}"
            wdir.mkdir(parents=True)
            # Each worker runs in its own directory: an executor that opened "rotated/x.pcap" would look there.
            self._start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                        "--port", str(free_port()), "--webui-port", str(free_port()), "--cores", "1",
                        "--memory", "512m", "--work-dir", str(wdir / "work"), cwd=wdir)

    def _start(self, name: str, cls: str, *args: str, cwd: Path | None = None) -> None:
        log = self.root / f"{name}.log"
        self.logs.append(log)
        with open(log, "wb") as out:
            self.procs.append(subprocess.Popen([str(_spark_class()), cls, *args], env=self.env, cwd=cwd or self.root,
                                               stdout=out, stderr=subprocess.STDOUT, start_new_session=True))

    def wait_for_workers(self, n: int, timeout: float = 120) -> None:
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

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, 15)  # spark-class execs java in the group it started
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
                p.wait()


@pytest.fixture
def cluster(spark_available, tmp_path):
    c = StandaloneCluster(tmp_path / "cluster")
    try:
        c.start(workers=2)
        c.wait_for_workers(2)
        yield c
    finally:
        c.stop()


def test_a_standalone_cluster_gives_the_embedded_report_for_relative_paths(cluster, tmp_path):
    user = tmp_path / "user"  # where the user types the command
    user.mkdir()
    split_pcap(CAPTURES / "scenarios" / "eviction-thrash.pcap", user / "rotated")
    files = sorted((str(p.relative_to(user)) for p in (user / "rotated").iterdir()), key=lambda f: (len(f), f))
    assert len(files) == 3 and not any(os.path.isabs(f) for f in files)
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1",
               # two executors of 512 MB on this shared machine, not 1 GB each
               PYSPARK_SUBMIT_ARGS="--conf spark.executor.memory=512m --conf spark.cores.max=2 pyspark-shell")

    embedded = subprocess.run([*FETCHTOOL, "analyze", "--format", "json", *files], cwd=user, env=env,
                              capture_output=True, text=True, timeout=120)
    assert embedded.returncode == 0, embedded.stderr
    spark = subprocess.run([*FETCHTOOL, "analyze", "--format", "json", "--engine", "spark", "--master", cluster.url,
                            *files], cwd=user, env=env, capture_output=True, text=True, timeout=600)
    assert spark.returncode == 0, spark.stderr[-3000:]
    assert spark.stdout == embedded.stdout
    assert json.loads(spark.stdout)["capture"]["decode"]["files"] == [os.path.basename(f) for f in files]
    assert spark.stderr == embedded.stderr  # quiet: no JVM or log4j line
    # the executors did run on the workers (not in a local driver)
    apps = list((tmp_path / "cluster" / "worker0" / "work").glob("app-*")) + list(
        (tmp_path / "cluster" / "worker1" / "work").glob("app-*"))
    assert apps
