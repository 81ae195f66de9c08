"""The Spark engine gives the polars engine's report: on the repo's captures, on scenario captures, and on one
capture cut into rotated files (tcpdump -C style), compared with the polars report on the unsplit file.

The analyze JSON has no timing fields (durations in it are capture time), so reports are compared whole, as the
`render` text where order matters (dicts that differ only in order compare equal). For the rotated set exactly one
thing is mapped, and it is said here: the Spark engine names rows of a rotated set by the set's label
("cap.pcap+2": the first file and how many follow) where the polars engine on the unsplit file names that file, and
the decode report lists the three files it read where polars lists one. Frames are NOT mapped: within a rotated set
the Spark engine numbers frames across the files as `mergecap -a` does, which is exactly the unsplit file's
numbering.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fetchtool.analysis.reports.json_report import render
from fetchtool.analysis.run import analyze_capture
from fetchtool.capture.reader import CaptureError
from fetchtool.cli import app
from fetchtool.pipeline.spark import analyze_spark

from capture_files import split_pcap

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
CAPTURES = REPO / "captures"
REAL = sorted(p for p in CAPTURES.glob("*.pcap*"))
SCENARIOS = sorted((CAPTURES / "scenarios").glob("*.pcap"))
# franz-go against Kafka 4.3.1: sessionless fetches that name a session, (id, -1), after a refused (id, 0)
FRANZ = [CAPTURES / "kafka" / "franz-refused.pcap"]


def report(analysis) -> dict:
    return json.loads(json.dumps(analysis.to_json()))


@pytest.mark.parametrize("capture", REAL + SCENARIOS + FRANZ, ids=lambda p: p.name)
def test_spark_report_equals_polars_report(spark, capture):
    assert render(analyze_spark([capture], spark=spark)) == render(analyze_capture([capture]))


@pytest.mark.parametrize("share", [0, 10**9], ids=["brokers-estimate-their-sessionless-pairs", "savings-first"])
def test_a_sessionless_client_is_named_however_the_savings_are_scheduled(spark, monkeypatch, share):
    # confluent-kafka (librdkafka) never asks for a session, kafka-python does. The SESSIONLESS_CLIENT finding
    # reads the savings estimate: the brokers' tasks either estimate the pairs that may be sessionless themselves,
    # beside the savings job (few such exchanges: SESSIONLESS_SHARE), or get the savings' sums afterwards.
    from fetchtool.pipeline import spark as engine

    captures = [CAPTURES / "confluent-kafka-tansu.pcap", CAPTURES / "kafka-python-tansu.pcap"]
    expected = analyze_capture(captures)
    assert [f.code for f in expected.findings].count("SESSIONLESS_CLIENT") == 1
    monkeypatch.setattr(engine, "SESSIONLESS_SHARE", share)
    lines: list[str] = []
    assert render(analyze_spark(captures, spark=spark, progress=lines.append)) == render(expected)
    together = [line for line in lines if line.startswith("estimated 2 client-broker pairs' savings alongside ")]
    assert len(together) == (1 if share == 0 else 0), lines


@pytest.mark.parametrize("share", [0, 10**9], ids=["brokers-estimate-their-sessionless-pairs", "savings-first"])
def test_sessionless_fetches_naming_a_session_are_named_however_the_savings_are_scheduled(spark, monkeypatch, share):
    # franz-c3's (id, -1) fetches after its refused (id, 0) are sessionless: the brokers' tasks must know the pair
    # may be sessionless before the analysis (spark_stages.may_be_sessionless), as for (0, -1).
    from fetchtool.pipeline import spark as engine

    expected = analyze_capture(FRANZ)
    assert sorted(f.client_id for f in expected.findings if f.cause == "after_refusal") == ["franz-c3", "franz-newcomer"]
    monkeypatch.setattr(engine, "SESSIONLESS_SHARE", share)
    assert render(analyze_spark(FRANZ, spark=spark)) == render(expected)


@pytest.mark.parametrize("share", [0, 10**9], ids=["brokers-estimate-their-sessionless-pairs", "savings-first"])
def test_a_port_used_again_by_a_later_connection_starts_a_new_client_stream(spark, monkeypatch, tmp_path, share):
    # A client opens a session per connection, 300 times, its ephemeral ports wrapping after 100 (as a busy
    # host's do after ~64,000). The savings model is per client ip:port: the embedded engine starts afresh on a
    # port's next connection because it heard the last one end. The Spark engine hears of it too (stage 1's end
    # rows); before, the next connection continued the last one's model, and its new session read as churn.
    from fetchtool.pipeline import spark as engine

    capture = tmp_path / "storm.pcap"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "session_storm.py"), str(capture), "--sessions", "300",
                    "--ports", "100"], check=True, capture_output=True)
    expected = analyze_capture([capture])
    assert report(expected)["savings"]["total"]["lost_by_cause"] == {"session_start": 0}
    monkeypatch.setattr(engine, "SESSIONLESS_SHARE", share)
    assert render(analyze_spark([capture], spark=spark)) == render(expected)


def test_the_brokers_and_the_savings_run_as_tasks_of_their_own(spark):
    # One broker, one client: one partition of each. Spark 4.1+ makes a union of equally partitioned children one
    # task per partition index, so both ran one after the other in one task, a core idle (fetchtool turns that
    # off for its union, and leaves the session's setting as it was).
    sc = spark.sparkContext
    sc.setJobGroup("one-broker-one-client", "the analysis' tasks")
    try:
        analysis = analyze_spark([CAPTURES / "kafka-python-tansu.pcap"], spark=spark)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert len(analysis.brokers) == 1 and len(analysis.savings["per_client"]) == 1
    tracker = sc.statusTracker()
    last_job = max(tracker.getJobIdsForGroup("one-broker-one-client"))
    last_stage = max(tracker.getJobInfo(last_job).stageIds)
    assert tracker.getStageInfo(last_stage).numTasks == 2
    assert spark.conf.get("spark.sql.unionOutputPartitioning", None) in (None, "true")


def test_the_given_cache_size_shapes_both_reports_alike(spark):
    # The real one-slot capture: with --cache-slots 1 both engines cap live sessions and name the evictors.
    capture = CAPTURES / "scenarios-real" / "kafka-python-cache-full.pcap"
    expected = report(analyze_capture([capture], cache_slots=1, cache_shards=1))
    assert [b["max_live_sessions"] for b in expected["brokers"]] == [1]
    assert report(analyze_spark([capture], spark=spark, cache_slots=1, cache_shards=1)) == expected


@pytest.mark.parametrize("name", ["kafka-python-tansu.pcap", "scenarios/eviction-thrash.pcap"])
def test_rotated_files_give_the_unsplit_report(spark, tmp_path, name):
    unsplit = CAPTURES / name
    files = split_pcap(unsplit, tmp_path / "rotated")
    expected = report(analyze_capture([unsplit]))
    # The cuts are mid-flow: decoding the pieces one by one breaks a request/response pair apart (a response
    # without its request, a request without its response).
    orphans = sum(report(analyze_capture([f]))["capture"]["decode"]["orphan_responses"] for f in files)
    assert orphans > expected["capture"]["decode"]["orphan_responses"]

    got = report(analyze_spark([tmp_path / "rotated"], spark=spark))
    label = f"{unsplit.name}+2"
    assert got["capture"]["decode"]["files"] == [f.name for f in files]
    got["capture"]["decode"]["files"] = [unsplit.name]
    got = json.loads(json.dumps(got).replace(json.dumps(label), json.dumps(unsplit.name)))
    assert got == expected


def test_files_of_different_captures_stay_apart(spark, tmp_path):
    """Two captures in one directory are not a rotation: the report is the polars report on both files."""
    a, b = CAPTURES / "scenarios" / "healthy.pcap", CAPTURES / "scenarios" / "starvation.pcap"
    assert render(analyze_spark([a, b], spark=spark)) == render(analyze_capture([a, b]))


def test_a_client_filter_gives_both_engines_the_same_report(spark):
    capture = CAPTURES / "scenarios" / "eviction-thrash.pcap"
    expected = report(analyze_capture([capture], client="svc-a"))
    assert len(expected["savings"]["per_client"]) == 1
    assert report(analyze_spark([capture], spark=spark, client="svc-a")) == expected


def test_a_file_of_an_unsupported_link_type_is_named_by_both_engines(spark, tmp_path):
    wifi = tmp_path / "wlan0.pcap"   # three 802.11 frames: fetchtool reads no link type 105
    wifi.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 105)
                     + (struct.pack("<IIII", 1_700_000_000, 0, 60, 60) + bytes(60)) * 3)
    good = tmp_path / "healthy.pcap"   # beside it: the Spark engine lists files by path
    good.write_bytes((CAPTURES / "scenarios" / "healthy.pcap").read_bytes())
    both = report(analyze_spark([good, wifi], spark=spark))
    assert both == report(analyze_capture([good, wifi]))
    assert "wlan0.pcap: nothing could be read: unsupported link type 105" in json.dumps(both["capture"]["decode"])
    for analyze in (analyze_capture, lambda paths: analyze_spark(paths, spark=spark)):
        with pytest.raises(CaptureError, match=r"wlan0.pcap: nothing could be read: unsupported link type 105"):
            analyze([wifi])


def test_cli_analyze_with_the_spark_engine(spark):
    capture = CAPTURES / "kafka-python-tansu.pcap"
    runner = CliRunner()
    polars_out = runner.invoke(app, ["analyze", str(capture), "--format", "json"])
    spark_out = runner.invoke(app, ["analyze", str(capture), "--format", "json", "--engine", "spark",
                                    "--master", "local[2]"])
    assert spark_out.exit_code == 0, spark_out.output
    assert spark_out.stdout == polars_out.stdout
    assert spark_out.stderr == ""  # quiet when stderr is no terminal

    # --verbose: a line per stage, saying what it did
    verbose = runner.invoke(app, ["analyze", str(capture), "--format", "json", "--engine", "spark",
                                  "--master", "local[2]", "--verbose"])
    assert verbose.stdout == polars_out.stdout
    said = [line for line in verbose.stderr.splitlines() if line.startswith("spark: ")]
    stages = [line.split(" in ")[0].split(" alongside")[0] for line in said]
    assert stages == ["spark: read 1 file (1 capture)", "spark: decoded 2 TCP flows, 5 exchanges",
                      "spark: analysed 1 broker", "spark: estimated 1 client-broker pair's savings"]
    assert all(len(line) <= 80 for line in said), said  # one line each in an 80-column terminal


def test_asking_for_spark_without_pyspark_is_a_one_line_error():
    # The real CLI in a fresh interpreter where `import pyspark` fails, as on a default install.
    code = "import sys; sys.modules['pyspark'] = sys.modules['pyspark.sql'] = None; from fetchtool.__main__ import main; main()"
    res = subprocess.run([sys.executable, "-c", code, "analyze", str(CAPTURES / "kafka-python-tansu.pcap"),
                          "--engine", "spark"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1
    assert res.stderr == "error: the Spark engine needs PySpark and Java 17+: pip install 'fetchtool[spark]'\n"
    assert res.stdout == ""


def test_uris_are_passed_as_given(spark):
    """file: URIs name local files; other URIs (hdfs:, s3a:) reach the executors as given, which copy the file
    through pyarrow's filesystems before reading it (shown here with a file:// URI, the one this machine has)."""
    from fetchtool.pipeline.spark_stages import count_packets

    capture = CAPTURES / "scenarios" / "healthy.pcap"
    assert render(analyze_spark([f"file://{capture}"], spark=spark)) == render(analyze_capture([capture]))
    local = count_packets(0, str(capture))
    assert local[1] > 0
    assert count_packets(0, f"file://{capture}") == local
    missing = count_packets(0, f"file://{capture}.missing")
    assert missing[1] == 0 and missing[4].startswith(f"file://{capture}.missing: cannot open")


@pytest.mark.parametrize("given, ours", [
    ("-Dfetchtool.test.kept=1", True),
    # the user's own JIT or collector choice: fetchtool adds none of its -XX: flags after it
    ("-Dfetchtool.test.kept=1 -XX:+UseParallelGC", False),
], ids=["no -XX flags given", "-XX flags given"])
def test_executor_jvm_options_the_user_gives_are_kept(spark_classes, tmp_path, given, ours):
    # fetchtool sets the executors' log4j configuration and, on a standalone cluster's cold executor JVMs, C1
    # and the serial collector (as the driver's); setting the key alone replaced what the user gave
    code = ("from fetchtool.pipeline.spark import spark_session\n"
            "print(spark_session('local[1]').sparkContext.getConf().get('spark.executor.extraJavaOptions'))\n")
    env = {**os.environ, "PYSPARK_SUBMIT_ARGS": f"--conf 'spark.executor.extraJavaOptions={given}' pyspark-shell"}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300,
                         cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    options = res.stdout.strip().splitlines()[-1]
    assert given in options and "-Dlog4j2.configurationFile=" in options
    assert ("-XX:TieredStopAtLevel=1 -XX:+UseSerialGC" in options) == ours
