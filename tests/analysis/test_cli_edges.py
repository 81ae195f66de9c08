"""What a support engineer sees from analyze, sessions, savings and decode when the capture is damaged, an option
is wrong, or the report goes to a pipe instead of a terminal."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fetchtool.cli import app

SCEN = Path(__file__).resolve().parents[2] / "captures" / "scenarios"
THRASH = SCEN / "eviction-thrash.pcap"
runner = CliRunner()


def pcap(link_type: int, records: list[bytes], declared_len: int | None = None) -> bytes:
    head = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, link_type)
    body = b"".join(struct.pack("<IIII", 1_700_000_000, 0, declared_len or len(r), len(r)) + r for r in records)
    return head + body


@pytest.fixture
def wifi_only(tmp_path) -> Path:
    path = tmp_path / "wlan0.pcap"
    path.write_bytes(pcap(105, [bytes(60)] * 3))   # 802.11 frames: a link type fetchtool does not decode
    return path


@pytest.fixture
def corrupt_first_record(tmp_path) -> Path:
    path = tmp_path / "corrupt.pcap"
    path.write_bytes(pcap(1, [bytes(60)], declared_len=2**31 - 1))
    return path


def one_error_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.output, result.output
    return lines[0]


@pytest.mark.parametrize("command", [["analyze"], ["analyze", "--format", "json"], ["sessions"], ["savings"],
                                     ["decode"]])
@pytest.mark.parametrize("damaged", ["wifi_only", "corrupt_first_record"])
def test_a_file_nothing_can_be_read_from_fails_with_one_line(command, damaged, request):
    path = request.getfixturevalue(damaged)
    result = runner.invoke(app, [*command, str(path)])
    assert result.exit_code == 1
    assert f"{path.name}: nothing could be read" in one_error_line(result)


def test_next_to_a_good_capture_the_unreadable_one_is_a_warning(wifi_only):
    result = runner.invoke(app, ["analyze", str(THRASH), str(wifi_only), "--format", "json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["capture"]["fetch_exchanges"] == 17
    assert (f"warning: unreadable_file (x1): {wifi_only}: nothing could be read: unsupported link type 105 "
            "(IEEE802_11)") in result.stderr.splitlines()


@pytest.mark.parametrize("command", [["analyze"], ["analyze", "--format", "markdown"], ["sessions"], ["savings"]])
def test_a_truncated_capture_is_reported_with_a_warning_on_stderr(command, tmp_path):
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(THRASH.read_bytes()[:3000])
    result = runner.invoke(app, [*command, str(cut)])
    assert result.exit_code == 0
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and "cut.pcap: file cut" in warnings[0], result.stderr


def test_a_text_file_among_captures_is_named_not_dropped(tmp_path):
    notes = tmp_path / "notes.pcap"
    notes.write_text("customer notes, not a capture\n")
    result = runner.invoke(app, ["analyze", str(THRASH), str(notes)])
    assert result.exit_code == 0
    assert any(line.startswith("warning: unreadable_file") and "notes.pcap: not a pcap" in line
               for line in result.stderr.splitlines())


@pytest.mark.parametrize("command", [["analyze"], ["decode", "--format", "table"], ["savings"]])
def test_several_unreadable_files_are_each_named_on_the_one_warning_line(command, tmp_path):
    # five files a customer attached that are no captures, given after a good one: one counted line names the first
    # three in the order given and counts the other two; the JSON keeps its three examples
    bad = []
    for i in range(5):
        bad.append(tmp_path / f"note{i}.pcap")
        bad[-1].write_text(f"customer note {i}\n")
    result = runner.invoke(app, [*command, str(THRASH), *map(str, bad)])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if "unreadable_file" in line]
    assert len(lines) == 1, result.stderr
    named = lines[0].split("; ")
    assert named[0].startswith(f"warning: unreadable_file (x5): {bad[0]}: not a pcap")
    assert [part.split(":")[0] for part in named[1:3]] == [str(bad[1]), str(bad[2])]
    assert named[3] == "and 2 more" and str(bad[3]) not in lines[0]


def test_the_json_report_keeps_three_examples_of_the_unreadable_files(tmp_path):
    bad = [tmp_path / f"note{i}.pcap" for i in range(4)]
    for path in bad:
        path.write_text("not a capture\n")
    result = runner.invoke(app, ["analyze", str(THRASH), *map(str, bad), "--format", "json"])
    unreadable = json.loads(result.stdout)["capture"]["decode"]["warnings"]["unreadable_file"]
    assert unreadable["count"] == 4
    assert [e.split(":")[0] for e in unreadable["examples"]] == list(map(str, bad[:3]))


def test_analyze_client_filter_applies_to_the_savings_too():
    def savings(*args):
        result = runner.invoke(app, [*args, "--format", "json"])
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        if args[0] == "analyze":
            return data["savings"]
        return {k: v for k, v in data.items() if k not in ("fetchtool_version", "contract_version")}

    everyone = savings("analyze", str(THRASH))
    assert len(everyone["per_client"]) == 5
    for client in ("svc-a", "10.0.1.10"):
        only = savings("analyze", str(THRASH), "--client", client)
        assert only == savings("savings", str(THRASH), "--client", client)   # the savings command's own filter
        assert len(only["per_client"]) == 1
        assert 0 < only["total"]["exchanges"] < everyone["total"]["exchanges"]
    nobody = savings("analyze", str(THRASH), "--broker", "10.9.9.9")
    assert nobody["per_client"] == [] and nobody["total"]["exchanges"] == 0


@pytest.mark.parametrize("command", ["analyze", "savings"])
def test_a_filter_that_matches_nothing_says_so_instead_of_an_empty_report(command):
    quiet = runner.invoke(app, [command, str(THRASH), "--client", "svc-x", "--format", "json"])
    assert quiet.exit_code == 0, quiet.output
    assert quiet.stderr == "warning: no Fetch exchange in the capture matched --client 'svc-x'\n"
    both = runner.invoke(app, [command, str(THRASH), "--client", "svc-a", "--broker", "10.9.9.9"])
    assert "matched --client 'svc-a' and --broker '10.9.9.9'" in both.stderr
    assert runner.invoke(app, [command, str(THRASH), "--client", "svc-a"]).stderr == ""


def test_a_cache_size_that_leaves_every_shard_empty_is_said_and_the_evictions_stay_unexplained():
    # The thrash capture's broker had 3 slots in one shard. Told "3 slots" alone, analyze assumes Kafka 3.8's 8
    # shards (0 slots each): no eviction can be shown, and the user is told why; with one shard both are found.
    def causes(*args):
        result = runner.invoke(app, ["analyze", str(THRASH), "--format", "json", *args])
        assert result.exit_code == 0, result.output
        found = [f.get("cause") for f in json.loads(result.stdout)["findings"]
                 if f["code"] == "FETCH_SESSION_ID_NOT_FOUND"]
        return found, result.stderr

    found, stderr = causes("--cache-slots", "3")
    assert found == ["unknown", "unknown"]
    assert stderr.startswith("warning: --cache-slots 3 over 8 shards leaves 0 slots per shard")
    assert causes("--cache-slots", "3", "--cache-shards", "1") == (["evicted", "evicted"], "")


@pytest.mark.parametrize("command", [["analyze"], ["sessions"], ["savings"], ["decode"]])
@pytest.mark.parametrize("port", ["99999", "0", "-5"])
def test_a_port_out_of_range_is_a_usage_error(command, port):
    result = runner.invoke(app, [*command, str(THRASH), "--port", port])
    assert result.exit_code == 2
    assert one_error_line(result) == f"error: --port must be 1-65535, got {port}"


@pytest.mark.parametrize("args", [["analyze", "--format", "pdf"], ["savings", "--format", "pdf"],
                                  ["analyze", "--engine", "duckdb"], ["analyze", "--cache-slots", "-1"],
                                  ["sessions", "--cache-shards", "0"], ["decode", "--master", "local[2]"]])
def test_bad_option_values_exit_2_with_one_line(args):
    result = runner.invoke(app, [args[0], str(THRASH), *args[1:]])
    assert result.exit_code == 2
    one_error_line(result)


def test_tables_sent_to_a_pipe_keep_whole_ids():
    # CliRunner's stdout is not a terminal, as with `fetchtool analyze x.pcap > report.txt`.
    data = json.loads(runner.invoke(app, ["analyze", str(THRASH), "--format", "json"]).stdout)
    table = runner.invoke(app, ["analyze", str(THRASH)]).stdout
    timelines = runner.invoke(app, ["sessions", str(THRASH)]).stdout
    assert "…" not in table and "…" not in timelines
    for s in data["sessions"]:
        assert str(s["session_id"]) in table and str(s["session_id"]) in timelines
        assert f"{s['client_id']}@{s['client']}" in table
    for c in data["savings"]["per_client"]:
        assert c["client"] in runner.invoke(app, ["savings", str(THRASH)]).stdout


@pytest.mark.parametrize("args", [["synth", "no-such-scenario", "-o", "x.pcap"], ["synth", "healthy"]])
def test_synth_bad_option_values_exit_2_with_one_line(args):
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    one_error_line(result)
