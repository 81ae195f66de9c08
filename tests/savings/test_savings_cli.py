"""`fetchtool savings` and the `savings` key of `fetchtool analyze --format json`."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from fetchtool.cli import app

CONTRACT = ("exchanges", "actual_request_bytes", "actual_response_bytes", "full_request_bytes", "full_response_bytes",
            "incremental_request_bytes", "incremental_response_bytes", "records_bytes", "saved_bytes")
runner = CliRunner()


def test_savings_json_has_the_contract_per_client_and_broker():
    res = runner.invoke(app, ["savings", "captures/scenarios/sessionless-many.pcap",
                              "captures/scenarios/healthy.pcap", "--format", "json"])
    assert res.exit_code == 0, res.output
    s = json.loads(res.output)
    for group in [s["total"], *s["per_client"], *s["per_broker"]]:
        assert all(k in group for k in CONTRACT)
        assert group["saved_bytes"] == (group["actual_request_bytes"] + group["actual_response_bytes"]
                                        - group["incremental_request_bytes"] - group["incremental_response_bytes"])
    assert {c["client_id"] for c in s["per_client"]} == {"rdkafka", "consumer-a", "consumer-b"}
    assert sum(c["exchanges"] for c in s["per_client"]) == s["total"]["exchanges"]
    rd = next(c for c in s["per_client"] if c["client_id"] == "rdkafka")
    assert rd["potential_bytes"] == rd["saved_bytes"] > 0 and rd["saved_bytes_per_hour"] > 0


def test_savings_table_shows_the_clients_and_a_chart():
    res = runner.invoke(app, ["savings", "captures/scenarios/sessionless-many.pcap"], env={"COLUMNS": "160"})
    assert res.exit_code == 0, res.output
    # one row per client (client id@host, as analyze names it), its connections listed beside it
    assert "rdkafka@10.0.6.1" in res.output and "10.0.6.1:46000" in res.output
    assert "█" in res.output and "incr." in res.output


def test_savings_jsonl_gives_one_row_per_fetch_exchange():
    res = runner.invoke(app, ["savings", "captures/scenarios/sarama-churn.pcap", "--format", "jsonl"])
    rows = [json.loads(line) for line in res.output.splitlines()]
    assert len(rows) == 8 and rows[0]["cause"] == "session_start" and rows[-1]["cause"] == "churn"
    assert all(r["incremental_request_bytes"] < r["actual_request_bytes"] for r in rows[1:])


def test_savings_bad_input_is_one_line(tmp_path):
    bad = tmp_path / "x.pcap"
    bad.write_bytes(b"not a capture")
    res = runner.invoke(app, ["savings", str(bad)])
    assert res.exit_code == 1 and len(res.output.strip().splitlines()) == 1


def test_analyze_json_carries_the_savings_key():
    res = runner.invoke(app, ["analyze", "captures/scenarios/sessionless-many.pcap", "--format", "json"])
    assert res.exit_code == 0, res.output
    s = json.loads(res.output)["savings"]
    assert all(k in s["total"] for k in CONTRACT)
    assert s["per_client"][0]["client"] == "10.0.6.1:46000" and s["per_client"][0]["client_id"] == "rdkafka"
    assert s["per_broker"][0]["broker"] == "10.0.0.100:9092"
