"""replay at scale: captures of many short connections, and the open-files limit.

The captures are written by fetchtool's synthetic world (the session engine answers, real wire bytes): each
client connects, makes a full fetch that creates a session, two incremental fetches, and closes.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fetchtool.broker.server import Broker
from fetchtool.broker.state import BrokerConfig
from fetchtool.cli import app
from fetchtool.replay.driver import ReplayOptions, replay
from fetchtool.replay.loading import load_plan
from fetchtool.replay.simulate import SimConfig
from fetchtool.replay.tally import captured_counts
from fetchtool.synth.world import JavaLikeClient, World

REPO = Path(__file__).resolve().parents[2]
PARTS = [("orders", p) for p in range(3)]


def _short_connections(path: Path, n: int, *, overlapping: bool = False) -> Path:
    """N short connections one after another (or all open at once with `overlapping`)."""
    w = World(path)
    try:
        broker = w.broker(slots=max(1000, n), shards=1)
        for tp in PARTS:
            broker.produce(*tp, 10)
        clients = []
        for i in range(n):
            conn = w.connect(broker, f"10.1.{i // 250}.{1 + i % 250}", 20000 + i, f"short-{i % 7}")
            client = JavaLikeClient(conn, PARTS)
            client.poll()
            if overlapping:
                clients.append(client)
                continue
            client.poll()
            client.poll()
            conn.close()
            w.advance(0.005)
        for client in clients:
            client.poll()
            client.conn.close()
    finally:
        w.close()
    return path


def test_a_capture_counts_the_connections_it_holds_open_at_once(tmp_path):
    one_after_another, _ = load_plan([_short_connections(tmp_path / "seq.pcap", 40)])
    all_at_once, _ = load_plan([_short_connections(tmp_path / "all.pcap", 40, overlapping=True)])
    assert one_after_another.connections_at_once() == 1
    assert all_at_once.connections_at_once() == 40


@pytest.mark.slow
def test_three_thousand_short_connections_replay_completely_as_fast_as_possible(tmp_path):
    """Every request answered, one live session per captured one, one connection open at a time. Measured:
    ~3 s of CPU for the replay (the whole command ~5 s on an idle machine); before, the as-fast sequencer woke
    every waiting connection on every event and 2,000 connections took 118 s, so 60 s catches the quadratic."""
    capture = _short_connections(tmp_path / "short.pcap", 3000)
    plan, _ = load_plan([capture])
    captured = captured_counts(plan).totals
    assert (captured.requests, captured.sessions_created) == (9000, 3000)
    started = time.monotonic()
    res = CliRunner().invoke(app, ["replay", str(capture), "--as-fast-as-possible", "--cache-slots", "3000",
                                   "--format", "json"])
    took = time.monotonic() - started
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    totals = doc["totals"]
    assert doc["finished"] and not doc["interrupted"]
    assert (totals["requests"], totals["responses"], totals["timeouts"]) == (9000, 9000, 0)
    assert totals["sessions_created"] == captured.sessions_created
    assert totals["errors"] == {} and doc["divergence"] == []
    assert doc["broker_metrics"]["NumIncrementalFetchSessions"] == 3000
    assert took < 60, took


def test_more_connections_open_at_once_than_the_brokers_default_limit_are_all_answered(tmp_path):
    """1,200 clients connected together, all from loopback in the replay: the embedded broker is sized for them.
    Before, its default limit of 1,000 connections refused 200, whose fetches each waited out the timeout."""
    if resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 2 * 2400 + 64:
        pytest.skip("the hard limit of open files is below what 1,200 connections and their broker ends need")
    plan, _ = load_plan([_short_connections(tmp_path / "all.pcap", 1200, overlapping=True)])
    assert plan.connections_at_once() == 1200
    run = asyncio.run(replay(plan, ReplayOptions(config=SimConfig(2000, 1, 30000), as_fast=True, timeout_s=5)))
    totals = run.totals()
    assert (totals.requests, totals.responses, totals.sessions_created) == (2400, 2400, 1200)
    assert sum(r.timeouts for r in run.streams) == 0 and run.peak_connections == 1200


def test_a_paced_replay_running_late_holds_few_connections_open(tmp_path):
    """At 200 times the captured speed the replay falls behind the capture's clock; the overdue connections wait
    for a place instead of all opening at once (the capture's connections never overlap)."""
    plan, _ = load_plan([_short_connections(tmp_path / "short.pcap", 300)])
    run = asyncio.run(replay(plan, ReplayOptions(config=SimConfig(1000, 1, 30000), speed=200.0)))
    totals = run.totals()
    assert run.finished and (totals.requests, totals.responses, totals.sessions_created) == (900, 900, 300)
    assert run.connection_bound == 17  # the capture's one connection at a time, and room for 16 late ones
    assert 1 <= run.peak_connections <= run.connection_bound


def test_against_a_broker_every_session_the_capture_left_open_is_closed_at_the_end(tmp_path):
    """250 connections, each leaving its session open: the closes go out in pipelined batches (more than one
    here), and the broker holds no session afterwards."""
    plan, _ = load_plan([_short_connections(tmp_path / "short.pcap", 250)])

    async def run():
        broker = Broker(BrokerConfig(port=0, cache_slots=1000, auto_create_partitions=0))
        await broker.start()
        try:
            done = await replay(plan, ReplayOptions(broker=f"127.0.0.1:{broker.port}", create_topics=True,
                                                    as_fast=True, timeout_s=10))
            return done, broker.sessions()
        finally:
            await broker.stop()

    done, left = asyncio.run(run())
    totals = done.totals()
    assert (totals.requests, totals.responses, totals.sessions_created) == (750, 750, 250)
    assert done.closed_sessions == 250 and left == []


def _with_open_files(limit: int, code: str, hard: int | None = None) -> subprocess.CompletedProcess:
    """Run python `code` with the open-files limit at `limit` (the hard limit too unless given), as `ulimit -n`
    would set it."""
    preamble = f"import resource; resource.setrlimit(resource.RLIMIT_NOFILE, ({limit}, {hard or limit}))\n"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", preamble + code], capture_output=True, text=True, env=env,
                          timeout=120)


def test_a_capture_holding_more_connections_than_ulimit_allows_is_refused_in_one_line(tmp_path):
    capture = _short_connections(tmp_path / "all.pcap", 300, overlapping=True)
    res = _with_open_files(256, f"import sys; sys.argv = ['fetchtool', 'replay', {str(capture)!r}, "
                                f"'--as-fast-as-possible']; from fetchtool.__main__ import main; main()")
    assert res.returncode == 1, res.stderr
    assert res.stderr.splitlines() == [
        "error: the capture holds 300 connections open at once; replaying them against the embedded broker needs "
        "about 664 open files, the limit is 256: raise it (ulimit -n 664)"], res.stderr
    assert res.stdout == ""


def test_a_soft_open_files_limit_below_what_the_capture_needs_is_raised_within_the_hard_limit(tmp_path):
    capture = _short_connections(tmp_path / "all.pcap", 300, overlapping=True)
    res = _with_open_files(256, f"import sys; sys.argv = ['fetchtool', 'replay', {str(capture)!r}, "
                                f"'--as-fast-as-possible', '--format', 'json']; from fetchtool.__main__ import main; "
                                f"main()", hard=4096)
    assert res.returncode == 0, res.stderr
    totals = json.loads(res.stdout)["totals"]
    assert (totals["requests"], totals["responses"], totals["sessions_created"]) == (600, 600, 300)


def test_a_connection_refused_for_want_of_open_files_stops_the_replay_with_one_line():
    code = """
import asyncio
from fetchtool.replay.net import OutOfFiles, connect

async def main():
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    hold = []
    try:
        while True:
            hold.append(open("/dev/null"))
    except OSError:
        pass
    try:
        await connect("127.0.0.1", port, 5)
    except OutOfFiles as exc:
        print(exc)
    server.close()

asyncio.run(main())
"""
    res = _with_open_files(64, code)
    assert res.returncode == 0, res.stderr
    [line] = res.stdout.splitlines()
    assert line.startswith("out of open files connecting to 127.0.0.1:") and "(ulimit -n is 64)" in line, line
