"""replay: re-issue a capture's fetches over real sockets, against the embedded broker and against tansu."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fetchtool.cli import app
from fetchtool.replay.driver import ReplayError, ReplayOptions, ReplayRun, divergence, replay
from fetchtool.replay.loading import load_plan
from fetchtool.replay.plan import build_plan
from fetchtool.replay.simulate import SimConfig, simulate
from fetchtool.replay.tally import captured_counts

from .scenario import Consumer
from .test_simulate import _small_consumers_then_a_big_one

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
REAL_CAPTURES = sorted(p for p in CAPTURES.glob("*.pcap*"))


def _run(plan, **options) -> ReplayRun:
    return asyncio.run(replay(plan, ReplayOptions(**options)))


def _errors(run: ReplayRun) -> dict:
    out: dict = {}
    for r in run.streams:
        for code, n in r.tally.errors.items():
            out[code] = out.get(code, 0) + n
    return out


def test_the_embedded_broker_with_the_tight_cache_reproduces_the_eviction_and_a_larger_cache_removes_it():
    # On the captured clock (as fast as possible): the 100 ms eviction decides which session is stale, and a
    # replay paced by the wall clock on a loaded machine sends some fetches late enough to change that
    plan = _small_consumers_then_a_big_one()
    tight = _run(plan, config=SimConfig(2, 1, 100), as_fast=True)
    assert tight.finished and _errors(tight) == {70: 1}
    # the replay agrees with the in-memory simulation of the same configuration, client by client (both brokers
    # draw the captured session ids, so ties between equal sessions go the same way)
    predicted = simulate(plan, SimConfig(2, 1, 100))
    for r in tight.streams:
        sim = predicted.streams[r.stream.index]
        assert (dict(r.tally.errors), r.tally.sessions_created) == (dict(sim.errors), sim.sessions_created)
    assert tight.broker_metrics["IncrementalFetchSessionEvictionsPerSec"] == 2
    roomy = _run(plan, config=SimConfig(3, 1, 100), as_fast=True)
    assert _errors(roomy) == {}
    assert sum(r.tally.sessions_created for r in roomy.streams) == 3
    # the driver maps captured session ids to live ones (the embedded broker drew the captured id where it could)
    ids = {r.stream.client_id: r.session_ids for r in roomy.streams}
    assert ids == {"small-a": {101: 101}, "small-b": {202: 202}, "big": {303: 303}}


def test_as_fast_as_possible_keeps_the_captured_order_and_the_captured_clock():
    plan = _small_consumers_then_a_big_one()
    fast = _run(plan, config=SimConfig(2, 1, 100), as_fast=True)
    assert _errors(fast) == {70: 1}
    assert fast.elapsed_s < plan.duration_ms / 1000  # faster than the capture itself


@pytest.mark.parametrize("capture", REAL_CAPTURES, ids=lambda p: p.name)
def test_real_client_captures_replay_against_the_embedded_broker_without_divergence(capture):
    plan, _ = load_plan([capture])
    run = _run(plan, as_fast=True)
    assert run.finished
    live = sum(r.tally.responses for r in run.streams)
    assert live == plan.requests  # every request answered, including the one the capture lost at close
    assert divergence(run, captured_counts(plan).streams) == []
    for r in run.streams:
        if r.stream.behaviour == "session":  # kafka-python: tansu refused sessions, the embedded broker grants one
            assert r.tally.sessions_created == 1 and r.tally.incremental == r.tally.requests - 1
        else:
            assert r.tally.sessions_created == 0 and r.tally.incremental == 0


@pytest.mark.tansu
def test_replay_against_tansu_maps_topics_and_falls_back_to_full_fetches(tansu_broker):
    plan, _ = load_plan([CAPTURES / "kafka-python-tansu.pcap"])
    with pytest.raises(ReplayError, match="has no topic"):
        _run(plan, broker=tansu_broker.bootstrap, timeout_s=10)
    run = _run(plan, broker=tansu_broker.bootstrap, create_topics=True, as_fast=True, timeout_s=10)
    assert run.target == tansu_broker.bootstrap and run.finished
    (r,) = run.streams
    assert r.tally.responses == plan.requests and dict(r.tally.errors) == {}
    assert r.tally.sessions_created == 0 and r.tally.incremental == 0
    assert any("fell back to full fetches" in note for note in run.notes)


def cancelled_after(plan, run: ReplayRun, seconds: float) -> None:
    """Replay into `run`, cancelled (as Ctrl-C does) after `seconds`."""

    async def interrupt():
        task = asyncio.create_task(replay(plan, run.options, run))
        await asyncio.sleep(seconds)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(interrupt())


def test_an_interrupted_replay_keeps_a_partial_report():
    plan = _small_consumers_then_a_big_one()
    run = ReplayRun(plan, ReplayOptions(config=SimConfig(3, 1, 100)))
    cancelled_after(plan, run, 0.4)
    sent = sum(r.tally.requests for r in run.streams)
    assert not run.finished and 0 < sent < plan.requests
    assert run.elapsed_s > 0


def test_cli_simulate_json_and_replay_json_follow_the_contract():
    capture = str(CAPTURES / "kafka-python-tansu.pcap")
    runner = CliRunner()
    sim = runner.invoke(app, ["simulate", capture, "--cache-slots", "1000,0", "--format", "json"])
    assert sim.exit_code == 0, sim.output
    doc = json.loads(sim.stdout)
    assert set(doc) >= {"captured", "configs"}
    assert [c["cache_slots"] for c in doc["configs"]] == [1000, 0]
    for key in ("requests", "sessions_created", "evictions", "errors", "incremental_share", "request_bytes",
                "response_bytes"):
        assert key in doc["captured"] and key in doc["configs"][0]["totals"]
    # slots=0 disables sessions: the session client never goes incremental
    assert doc["configs"][0]["totals"]["incremental_share"] > 0 == doc["configs"][1]["totals"]["incremental_share"]
    rep = runner.invoke(app, ["replay", capture, "--as-fast-as-possible", "--format", "json"])
    assert rep.exit_code == 0, rep.output
    doc = json.loads(rep.stdout)
    assert doc["target"] == "embedded" and set(doc) >= {"totals", "captured", "clients", "divergence"}
    assert doc["totals"]["responses"] == doc["totals"]["requests"] > 0
    assert doc["totals"]["rtt_ms"]["p50"] is not None


def test_cli_dry_run_and_bad_input_give_one_line_errors(tmp_path):
    runner = CliRunner()
    dry = runner.invoke(app, ["replay", str(CAPTURES / "aiokafka-tansu.pcap"), "--dry-run"])
    assert dry.exit_code == 0 and "5 Fetch requests from 1 client in 1 connection" in dry.stdout
    missing = runner.invoke(app, ["simulate", str(tmp_path / "nope.pcap")])
    assert missing.exit_code == 1 and "no such file" in missing.output.lower()
    bad = runner.invoke(app, ["simulate", str(CAPTURES / "aiokafka-tansu.pcap"), "--cache-slots", "lots"])
    assert bad.exit_code == 2 and "--cache-slots expects integers" in bad.output
    # A file that is not a capture at all: one line naming it, from both commands (once a traceback).
    junk = tmp_path / "notes.pcap"
    junk.write_text("not a capture\n")
    for command in (["simulate", str(junk)], ["replay", str(junk), "--dry-run"]):
        res = runner.invoke(app, command)
        assert res.exit_code == 1 and isinstance(res.exception, SystemExit), res.output  # not a traceback
        assert res.output.count("\n") == 1 and "not a pcap or pcapng capture" in res.output
    # A capture cut mid-record: what could be read is planned, the damage is one counted warning line.
    cut = tmp_path / "cut.pcap"
    cut.write_bytes((CAPTURES / "kafka-python-tansu.pcap").read_bytes()[:5000])
    res = runner.invoke(app, ["replay", str(cut), "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "warning: cut.pcap: file cut mid-record after frame 25; later data ignored (x1)" in res.output


@pytest.mark.parametrize("leader_epoch, note", [(5, True), (0, False), (-1, False)])
def test_a_captured_leader_epoch_the_embedded_broker_does_not_have_is_explained_not_left_as_a_bare_error(
        leader_epoch, note):
    # A capture from a cluster whose leaders were re-elected (epoch 5): the replayed requests name that epoch, the
    # embedded broker's leaders are at 0, and Kafka's read refuses the partitions with UNKNOWN_LEADER_EPOCH
    consumer = Consumer("10.0.0.1:40001", conn=1, client_id="after-reelection", max_wait_ms=0)
    consumer.session_workload(101, "orders", 3, 0.0, 0.05, 5)
    exchanges = [dataclasses.replace(ex, request_partitions=tuple(p._replace(current_leader_epoch=leader_epoch)
                                                                  for p in ex.request_partitions))
                 for ex in consumer.exchanges]
    run = _run(build_plan(exchanges), as_fast=True)
    assert _errors(run) == {}  # the sessions replay as captured
    refused = sum(r.partition_errors.get(75, 0) for r in run.streams)
    explained = [n for n in run.notes if n.startswith("UNKNOWN_LEADER_EPOCH (75), none of them captured: ")]
    assert (refused > 0, len(explained)) == (note, int(note))
    if note:
        assert "the embedded broker's leaders are all at epoch 0" in explained[0]
