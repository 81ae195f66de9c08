"""`decode --engine spark --out DIR` writes four Parquet datasets partitioned by capture date and broker, and
what they hold is what the embedded engine says: its exchanges and partitions tables row for row, the sessions
and findings of its analysis. Read back as a user would: polars with hive partitioning, and Spark SQL."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from fetchtool.cli import app

try:  # DuckDB is no dependency of fetchtool: where it is installed, it reads the datasets too
    import duckdb
except ImportError:
    duckdb = None

pytestmark = pytest.mark.spark

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
KEYS = {"exchanges": ["request_frame", "conn", "correlation_id"],
        "partitions": ["request_frame", "conn", "correlation_id", "entry", "topic", "partition"]}


def dataset(out: Path, name: str) -> pl.DataFrame:
    return pl.read_parquet(out / name / "**" / "*.parquet", hive_partitioning=True)


def same_tables(out: Path, embedded: Path, date: str) -> dict[str, int]:
    """The datasets' exchanges and partitions, row for row the embedded engine's tables: their heights."""
    heights = {}
    for table, keys in KEYS.items():
        got = dataset(out, table)
        assert got["capture_date"].cast(pl.Utf8).unique().to_list() == [date]
        got = got.drop("capture_date", "broker_dir").sort(keys)
        expected = pl.read_parquet(embedded / f"{table}.parquet").sort(keys)
        assert got.height == expected.height > 0
        assert got.to_dicts() == expected.to_dicts()
        heights[table] = got.height
    return heights


def test_decode_datasets_hold_the_embedded_tables_sessions_and_findings(spark, tmp_path):
    capture = CAPTURES / "scenarios" / "eviction-thrash.pcap"
    runner = CliRunner()
    res = runner.invoke(app, ["decode", str(capture), "--engine", "spark", "--master", "local[2]",
                              "--out", str(tmp_path / "spark")])
    assert res.exit_code == 0, res.output
    assert runner.invoke(app, ["decode", str(capture), "--out", str(tmp_path / "embedded")]).exit_code == 0
    analysis = json.loads(runner.invoke(app, ["analyze", str(capture), "--format", "json",
                                              "--sessions", "all"]).stdout)

    out = tmp_path / "spark"
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith((".", "_"))) == [
        "exchanges", "findings", "partitions", "sessions"]
    # partitioned by the capture's date and the broker, as directories any reader takes
    assert [p.relative_to(out / "exchanges").as_posix() for p in (out / "exchanges").glob("*/*")] == [
        "capture_date=2023-11-14/broker_dir=10.0.0.100_9092"]
    heights = same_tables(out, tmp_path / "embedded", "2023-11-14")
    assert f"wrote {heights['exchanges']} exchanges and {heights['partitions']} partition rows" in res.stderr

    sessions = dataset(out, "sessions").sort("created_request_frame")
    assert [(s["session_id"], s["end"]) for s in sessions.to_dicts()] == sorted(
        ((s["session_id"], s["end"]) for s in analysis["sessions"]), key=lambda s: [
            x["created_request_frame"] for x in analysis["sessions"] if x["session_id"] == s[0]][0])
    findings = dataset(out, "findings")
    assert sorted(zip(findings["code"], findings["frames"].to_list())) == sorted(
        (f["code"], f["frames"]) for f in analysis["findings"])
    assert findings.height == len(analysis["findings"]) > 0

    # Spark SQL over the same files: evictions per broker and day
    rows = spark.sql(f"""SELECT broker, capture_date, count(*) AS n FROM parquet.`{out}/findings`
                         WHERE cause = 'evicted' GROUP BY broker, capture_date""").collect()
    assert [(r.broker, str(r.capture_date), r.n) for r in rows] == [
        ("10.0.0.100:9092", "2023-11-14", sum(f["cause"] == "evicted" for f in analysis["findings"]))]
    if duckdb is not None:
        assert duckdb.sql(f"""SELECT broker, CAST(capture_date AS VARCHAR), count(*) FROM
                              read_parquet('{out}/findings/**/*.parquet', hive_partitioning = true)
                              WHERE cause = 'evicted' GROUP BY ALL""").fetchall() == [
            (r.broker, str(r.capture_date), r.n) for r in rows]


def test_each_broker_of_a_cluster_capture_gets_its_directory_written_by_the_tasks_that_decoded_it(spark, tmp_path):
    # four brokers, their flows split over stage 1's two tasks: a broker's directory holds a file from each task
    # that decoded some of its flows, and no row is lost or doubled on the way
    capture = CAPTURES / "kafka" / "cluster-followers.pcap"
    runner = CliRunner()
    for engine, out in ((["--engine", "spark", "--master", "local[2]"], "spark"), ([], "embedded")):
        res = runner.invoke(app, ["decode", str(capture), *engine, "--out", str(tmp_path / out)])
        assert res.exit_code == 0, res.output
    brokers = dataset(tmp_path / "spark", "exchanges").select("broker", "broker_dir").unique().sort("broker")
    assert brokers.height == 4
    assert [d.replace("_", ":") for d in brokers["broker_dir"]] == brokers["broker"].to_list()
    same_tables(tmp_path / "spark", tmp_path / "embedded", "2026-11-24")
