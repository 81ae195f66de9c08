"""Scenario: a large capture's savings are estimated in a process of their own (analysis.run.savings_apart, a
side consumer of the decoding child's items), while the command's process does the rest of the analysis. The
engineer must get the very report one process makes, with --client / --broker and a time window too, and a
one-line error (no traceback, no process left) if that process dies.

The captures are small: the size rule is lowered (BACKGROUND_MIN_BYTES = 0) so that they take the child path."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fetchtool.analysis import run as analysis_run
from fetchtool.capture import streams
from fetchtool.cli import app
from fetchtool.decoder import decode_capture
from fetchtool.decoding import forked

from capture_files import forked_children

ROOT = Path(__file__).resolve().parents[2] / "captures"
CAPTURES = [ROOT / "scenarios" / "eviction-thrash.pcap", ROOT / "scenarios-real" / "kafka-python-session-drop.pcap",
            ROOT / "kafka" / "java-evictions.pcap", ROOT / "kafka" / "java-rebalance.pcap"]
runner = CliRunner()


def report(args: list[str]) -> str:
    r = runner.invoke(app, [*args, "--format", "json"])
    assert r.exit_code == 0, r.output
    return r.stdout


@pytest.fixture
def large(monkeypatch):
    monkeypatch.setattr(streams, "BACKGROUND_MIN_BYTES", 0)
    monkeypatch.delenv("FETCHTOOL_ONE_PROCESS", raising=False)


def one_process(monkeypatch, args: list[str]) -> str:
    with monkeypatch.context() as m:
        m.setenv("FETCHTOOL_ONE_PROCESS", "1")
        return report(args)


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_savings_estimated_apart_give_the_report_of_one_process(path, large, monkeypatch):
    want = one_process(monkeypatch, ["analyze", str(path)])
    made = []
    real = analysis_run.savings_apart

    def counted(*args, **kwargs):
        made.append(side := real(*args, **kwargs))
        return side

    monkeypatch.setattr(analysis_run, "savings_apart", counted)
    with forked_children() as pids:
        got = report(["analyze", str(path)])
    assert len(pids) >= 2 and made and made[0].running, "decoded in a child, the savings in a process of their own"
    assert got == want
    assert json.loads(got)["savings"]["total"]["exchanges"] > 0


def test_the_same_with_a_client_a_broker_and_a_time_window(large, monkeypatch):
    path = str(ROOT / "scenarios" / "eviction-thrash.pcap")
    doc = json.loads(one_process(monkeypatch, ["analyze", path]))
    client, broker = doc["clients"][0]["client_id"], doc["brokers"][0]["broker"]
    first, last = doc["capture"]["first_ts"], doc["capture"]["last_ts"]
    middle = str(first + (last - first) / 2)
    for extra in (["--client", client], ["--broker", broker], ["--since", middle], ["--until", middle]):
        want = one_process(monkeypatch, ["analyze", path, *extra])
        with forked_children():
            assert report(["analyze", path, *extra]) == want, extra
    assert json.loads(one_process(monkeypatch, ["analyze", path, "--since", middle]))["savings"] != doc["savings"]


def test_sessions_is_the_same_too(large, monkeypatch):
    path = str(ROOT / "kafka" / "java-evictions.pcap")
    want = one_process(monkeypatch, ["sessions", path])
    with forked_children():
        assert report(["sessions", path]) == want


def test_a_savings_process_that_dies_is_a_one_line_error(large, monkeypatch):
    def dies(*args, **kwargs):
        def consume(items, ended):
            os.kill(os.getpid(), signal.SIGKILL)  # in the savings process only: the OOM killer, a kill -9

        return forked.SideConsumer(consume)

    monkeypatch.setattr(analysis_run, "savings_apart", dies)
    with forked_children() as pids:
        r = runner.invoke(app, ["analyze", str(CAPTURES[0]), "--format", "json"])
    assert len(pids) >= 2
    assert r.exit_code == 1 and "savings estimating process stopped unexpectedly" in r.output
    assert "Traceback" not in r.output


def test_analyze_items_estimates_the_savings_itself_when_nothing_runs_apart(large):
    run = decode_capture(CAPTURES[0], in_child=False)
    side = analysis_run.savings_apart()
    here = analysis_run.analyze_items(run, decode_report=run.report, ended=run.ended, savings_side=side)
    assert not side.running
    again = decode_capture(CAPTURES[0], in_child=False)
    assert here.to_json() == analysis_run.analyze_items(again, decode_report=again.report, ended=again.ended).to_json()
