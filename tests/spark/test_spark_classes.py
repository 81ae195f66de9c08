"""Spark's JVM classes archived once per machine: the first Spark command leaves a maker behind, later commands
load their classes from its archive and give the same reports; the tests' own Spark runs on this run's archive."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fetchtool.pipeline.spark_classes import (MAKING_FOR_AT_MOST_S, RETRY_AFTER_S, _sweep, archive_path, claim,
                                              java_options)

pytestmark = pytest.mark.spark

CAPTURE = Path(__file__).resolve().parents[2] / "captures" / "kafka-python-tansu.pcap"


def test_the_tests_spark_loads_its_classes_from_this_runs_archive(spark, spark_classes):
    assert spark_classes == archive_path() and spark_classes.parent == Path(os.environ["FETCHTOOL_CACHE_DIR"])
    assert spark_classes.stat().st_size > 50_000_000
    jvm_args = list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert f"-XX:SharedArchiveFile={spark_classes}" in jvm_args
    assert "-Xlog:all=warning:stderr" in jvm_args  # the JVM's own warnings never on stdout, the report's
    assert "sharing" in spark._jvm.java.lang.System.getProperty("java.vm.info")


def test_no_archive_option_until_the_archive_is_there(tmp_path):
    path = tmp_path / "spark-classes-0.jsa"
    assert "SharedArchive" not in java_options(path) and "ArchiveClasses" not in java_options(path)
    assert java_options(path, dump_to=tmp_path / "x.tmp").endswith(f"-XX:ArchiveClassesAtExit={tmp_path / 'x.tmp'}")
    path.write_bytes(b"archive")
    assert java_options(path).endswith(f"-XX:SharedArchiveFile={path}")


def test_one_maker_at_a_time_unless_the_last_one_died(tmp_path):
    path = tmp_path / "cache" / "spark-classes-0.jsa"
    assert claim(path)
    assert not claim(path)  # a maker is at work
    marker = path.with_name(path.name + ".making")
    stale = time.time() - MAKING_FOR_AT_MOST_S - 1
    os.utime(marker, (stale, stale))
    assert claim(path)  # its maker died long ago
    (tmp_path / "file").write_text("")
    assert not claim(tmp_path / "file" / "spark-classes-0.jsa")  # a cache directory that cannot be made


def test_a_maker_whose_jvm_wrote_no_archive_is_not_retried_by_every_command(tmp_path):
    # a Java without class-data sharing writes none: the next commands must not each start a 20 s maker again
    path = tmp_path / "spark-classes-0.jsa"
    failed = path.with_name(path.name + ".failed")
    failed.touch()
    assert not claim(path)
    day_ago = time.time() - RETRY_AFTER_S - 1
    os.utime(failed, (day_ago, day_ago))
    assert claim(path)  # a day later, one more try


@pytest.mark.slow
def test_the_first_spark_command_leaves_a_maker_whose_archive_later_commands_load(spark_available, tmp_path):
    env = {**os.environ, "FETCHTOOL_CACHE_DIR": str(tmp_path / "cache")}
    args = [sys.executable, "-m", "fetchtool", "analyze", str(CAPTURE), "--format", "json"]
    embedded = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
    spark = [*args, "--engine", "spark", "--master", "local[2]", "--verbose"]

    first = subprocess.run(spark, capture_output=True, text=True, env=env, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stdout == embedded.stdout
    assert "spark: archiving JVM classes in the background, once: later starts ~3 s faster" \
        in first.stderr.splitlines()
    archives = tmp_path / "cache"
    deadline = time.monotonic() + 300
    while not list(archives.glob("*.jsa")) or list(archives.glob("*.making")):
        assert time.monotonic() < deadline, sorted(p.name for p in archives.iterdir())
        time.sleep(1)
    assert [p.suffix for p in archives.iterdir()] == [".jsa"]  # put in place whole, nothing left behind

    later = subprocess.run(spark, capture_output=True, text=True, env=env, timeout=300)
    assert later.returncode == 0, later.stderr[-3000:]
    assert later.stdout == embedded.stdout
    assert "archiving" not in later.stderr


def test_a_maker_clears_what_dead_makers_left_but_not_a_living_ones(tmp_path):
    path = tmp_path / "spark-classes-0.jsa"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = path.with_name(f"{path.name}.{int(dead.stdout)}.tmp")
    working = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    for f in (left, working):
        f.write_bytes(b"half an archive")
    _sweep(path)
    assert not left.exists() and working.exists()
