"""Stage 0 while Spark starts: a command that starts a local Spark counts its files in forked children during
the JVM's start-up, and gives the report that Spark's own stage 0 gives."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fetchtool.analysis.reports.json_report import render
from fetchtool.cli import app
from fetchtool.pipeline import spark_stages as st
from fetchtool.pipeline.spark import _analyze, _Decoded
from fetchtool.pipeline.spark_early import CountedMeanwhile, local_cores

from capture_files import split_pcap

CAPTURES = Path(__file__).resolve().parents[2] / "captures"


@pytest.mark.parametrize("master, cores", [("local", 1), ("local[2]", 2), ("local[3,4]", 3),
                                           ("local[*]", os.cpu_count()), (None, os.cpu_count()),
                                           ("spark://127.0.0.1:7077", None), ("yarn", None), ("local-cluster[2,1,1024]", None)])
def test_only_a_local_master_is_counted_on_the_driver_with_as_many_children_as_its_cores(master, cores):
    assert local_cores(master) == cores


def test_the_children_count_every_file_as_a_spark_task_does(tmp_path):
    files = [str(f) for f in split_pcap(CAPTURES / "scenarios" / "eviction-thrash.pcap", tmp_path, pieces=5)]
    files.append(str(tmp_path / "gone.pcap"))  # a missing file is a count row with its error, as on Spark
    rows = CountedMeanwhile.start(files, {}, cores=2).counts()
    assert sorted(rows) == [st.count_packets(i, f) for i, f in enumerate(files)]
    assert "gone.pcap" in sorted(rows)[-1][4]


@pytest.mark.spark
def test_a_child_that_dies_leaves_the_counting_to_spark(spark, tmp_path, monkeypatch):
    capture = CAPTURES / "scenarios" / "eviction-thrash.pcap"
    files = [str(f) for f in split_pcap(capture, tmp_path / "rotated")]
    expected = render(_analyze(spark, _Decoded(spark, files, None), None, None, None, None, None, None, None))

    monkeypatch.setattr(st, "count_packets", lambda idx, path: os._exit(9))  # in the children only
    early = CountedMeanwhile.start(files, {}, cores=2)
    monkeypatch.undo()
    said: list[str] = []
    d = _Decoded(spark, files, None, progress=said.append, early=early)
    assert render(_analyze(spark, d, None, None, None, None, None, None, None)) == expected
    assert said[0].startswith("read 3 files (1 capture) in ")  # counted by Spark


@pytest.mark.spark
def test_a_command_that_starts_spark_counts_its_files_meanwhile_and_reports_as_before(spark, tmp_path):
    split_pcap(CAPTURES / "scenarios" / "eviction-thrash.pcap", tmp_path / "rotated")
    args = ["analyze", "rotated", "--format", "json", "--engine", "spark", "--master", "local[2]"]
    # this process's Spark is started: its command counts the files on Spark, as a cluster does
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        on_spark = CliRunner().invoke(app, args)
    finally:
        os.chdir(cwd)
    assert on_spark.exit_code == 0, on_spark.output
    fresh = subprocess.run([sys.executable, "-m", "fetchtool", *args, "--verbose"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
    assert fresh.returncode == 0, fresh.stderr[-2000:]
    assert fresh.stdout == on_spark.stdout
    assert "spark: read 3 files (1 capture) while Spark started" in fresh.stderr.splitlines()
