"""Scenario: a support engineer runs `fetchtool decode` on what the customer sent."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from fetchtool.cli import app

from .sweep import write_sweep

ROOT = Path(__file__).resolve().parents[2]
CONTRACT_KEYS = {
    "file", "request_frame", "response_frame", "ts", "response_ts", "client", "broker", "api_key", "api_version",
    "correlation_id", "client_id", "replica_id", "session_id", "session_epoch", "max_wait_ms", "min_bytes",
    "max_bytes", "isolation_level", "partitions", "forgotten", "error_code", "response_session_id",
    "throttle_time_ms", "response_partitions", "partition_errors", "records_bytes", "request_bytes",
    "response_bytes",
}
runner = CliRunner()


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "sweep.pcap"
    write_sweep(path)
    return path


def decode(*args: str):
    result = runner.invoke(app, ["decode", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def jsonl(result) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def test_jsonl_holds_the_contract_keys_in_request_order(sweep):
    rows = jsonl(decode(str(sweep)))
    assert len(rows) == 19 + 12 * 2 + 4  # v0-6 one exchange, v7-18 three, FetchSnapshot v0-1 two each
    assert all(CONTRACT_KEYS <= row.keys() for row in rows)
    frames = [row["request_frame"] for row in rows]
    assert frames == sorted(frames)
    retried = [r for r in rows if r["api_key"] == 1 and r["error_code"] == 71]
    assert len(retried) == 12 and all(r["response_session_id"] == 0 and r["response_partitions"] == 0
                                      for r in retried)
    # Before v7 the session fields decode as Kafka decodes them: the LEGACY (0, -1).
    assert {(r["session_id"], r["session_epoch"]) for r in rows if r["api_key"] == 1 and r["api_version"] < 7} \
        == {(0, -1)}


def test_a_broker_on_an_unusual_port_is_found_without_flags():
    capture = ROOT / "captures" / "confluent-kafka-tansu.pcap"
    rows = jsonl(decode(str(capture)))
    assert rows and {r["broker"] for r in rows} == {"127.0.0.1:38833"}
    assert {r["api_version"] for r in rows} == {16}


def test_out_writes_exchanges_and_partitions_as_parquet(sweep, tmp_path):
    result = decode(str(sweep), "--out", str(tmp_path))
    assert result.exit_code == 0
    exchanges = pl.read_parquet(tmp_path / "exchanges.parquet")
    partitions = pl.read_parquet(tmp_path / "partitions.parquet")
    rows = jsonl(decode(str(sweep)))
    assert exchanges.height == len(rows)
    assert exchanges["request_frame"].to_list() == [r["request_frame"] for r in rows]
    per_entry = partitions.group_by("entry").len().sort("entry")
    assert dict(per_entry.iter_rows()) == {
        "request": sum(r["partitions"] for r in rows),
        "forgotten": sum(r["forgotten"] for r in rows),
        "response": sum(r["response_partitions"] for r in rows),
    }
    records = partitions.filter(pl.col("entry") == "response")["records_bytes"].sum()
    assert records == sum(r["records_bytes"] for r in rows)


def test_table_format_lists_every_exchange(sweep):
    result = decode(str(sweep), "--format", "table")
    assert "47 exchanges" in result.stdout and "Fetch v18" in result.stdout and "FetchSnapshot v1" in result.stdout


def test_gzip_capture_decodes_like_the_plain_one(sweep, tmp_path):
    packed = tmp_path / "sweep.pcap.gz"
    packed.write_bytes(gzip.compress(sweep.read_bytes()))
    plain, zipped = jsonl(decode(str(sweep))), jsonl(decode(str(packed)))
    assert [{**r, "file": None} for r in plain] == [{**r, "file": None} for r in zipped]


@pytest.mark.parametrize("content, message", [
    (b"hello, this is a log file, not a capture\n", "not a pcap or pcapng capture"),
    (b"", "empty file"),
])
def test_a_file_that_is_not_a_capture_is_one_clear_line(tmp_path, content, message):
    bad = tmp_path / "ticket-attachment.pcap"
    bad.write_bytes(content)
    result = decode(str(bad))
    assert result.exit_code == 1  # unusable input; 2 is for a bad option value
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len([line for line in result.stderr.splitlines() if line.strip()]) == 1


def test_a_truncated_capture_still_reports_what_it_holds(sweep, tmp_path):
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(sweep.read_bytes()[: sweep.stat().st_size // 2])
    result = decode(str(cut))
    assert result.exit_code == 0
    assert len(jsonl(result)) > 10
    assert "cut mid-record" in result.stderr


def test_one_bad_file_among_good_ones_is_a_warning(sweep, tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("not a capture")
    result = decode(str(bad), str(sweep))
    assert result.exit_code == 0 and len(jsonl(result)) == 47
    assert "not a pcap or pcapng capture" in result.stderr


def test_piping_into_head_stops_quietly(sweep):
    cmd = f"{sys.executable} -m fetchtool decode {sweep} | head -1"
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=60)
    assert json.loads(proc.stdout)["request_frame"] == 4
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


def test_out_naming_an_existing_file_is_one_line_and_leaves_the_file_alone(sweep, tmp_path):
    # --out wants a directory; the engineer typed the name of a file that is already there.
    taken = tmp_path / "exchanges.txt"
    taken.write_text("yesterday's notes\n")
    result = decode(str(sweep), "--out", str(taken))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: cannot write {taken}: ") and len(result.stderr.splitlines()) == 1
    assert taken.read_text() == "yesterday's notes\n"
