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
from pathlib import Path

import pytest

from capture_files import split_pcap
from fetchtool.pipeline.spark_cluster import StandaloneCluster

pytestmark = [pytest.mark.spark, pytest.mark.slow]

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
FETCHTOOL = [shutil.which("fetchtool")] if shutil.which("fetchtool") else [sys.executable, "-m", "fetchtool"]


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
    # the executors ran on both workers, in their directories (not in the driver)
    assert {d.parents[2].name for d in cluster.executor_dirs()} == {"worker0", "worker1"}
