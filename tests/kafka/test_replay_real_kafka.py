"""fetchtool replay against Apache Kafka 4.3.1: the broker's own log is the judge, not fetchtool's numbers.

The capture is real Java consumers (Fetch v18, topic ids) recorded on another Kafka; replaying it means the
target gets the topic created under a new id, records at the rebased offsets and leaders before the first
fetch. Kafka's sessions.log then shows the replayed clients' sessions created and used incrementally.

The second story is a competing client that names a replayed client's session in a full Fetch request: Kafka
closes any session a full request names, so the replayed client's next incremental fetch finds no session
(FETCH_SESSION_ID_NOT_FOUND, 70). The capture had no such error; the replay's divergence section has to say so,
in the numbers Kafka logged. Kafka only evicts a session that has been idle, or alive, for 120 s, so within a
short test a closed session, not an evicted one, is what makes a 70.

The cache is 8 slots, 1 per shard: any session a replay left open would refuse a later one in its shard.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import broker_record as br
import pytest

from fetchtool.protocol.messages import fetch_request
from fetchtool.replay.loading import load_plan
from fetchtool.replay.tally import captured_counts

pytestmark = pytest.mark.kafka

KAFKA = {"nodes": 1, "cache_slots": 8}

CAPTURE = Path(__file__).resolve().parents[2] / "captures" / "kafka" / "java-rebalance.pcap"
_CREATED = re.compile(r"Created fetch session FetchSession\(id=(\d+),")


class LogMark:
    """The lines a node's logs gained since the mark was set: one test's share of the module's broker."""

    def __init__(self, node) -> None:
        self.node = node
        self.sessions_at = _lines(node.sessions_log)
        self.requests_at = _lines(node.requests_log)

    def sessions(self) -> br.SessionsLog:
        return br.parse_sessions_log(_read(self.node.sessions_log)[self.sessions_at:])

    def fetches(self, client_ids: set[str]) -> list[br.FetchRecord]:
        return [f for f in br.parse_requests_log(_read(self.node.requests_log)[self.requests_at:])
                if f.client_id in client_ids]


def _read(path: Path) -> list[str]:
    return path.read_text(errors="replace").splitlines(keepends=True) if path.exists() else []


def _lines(path: Path) -> int:
    return len(_read(path))


def _closed(log: br.SessionsLog) -> set[int]:
    """Sessions closed by a full request naming them, or emptied by an incremental one."""
    return {f.removed_session for f in log.closed_by_full} | {e.session_id for e in log.emptied}


def _replay_command(node, *options: str) -> list[str]:
    return [sys.executable, "-m", "fetchtool", "replay", str(CAPTURE), "--broker", node.bootstrap, "--create-topics",
            "--format", "json", "--timeout", "10", *options]


def _client_ids() -> set[str]:
    plan, _ = load_plan([CAPTURE])
    return {s.client_id for s in plan.streams}


def test_java_consumers_replay_on_kafka_with_their_sessions_and_incremental_fetches(kafka):
    node = kafka.nodes[0]
    mark = LogMark(node)
    done = subprocess.run(_replay_command(node, "--as-fast-as-possible"), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)

    kafka_said = mark.sessions()
    created = kafka_said.created_by_id()
    incremental = kafka_said.incremental_by_id()
    # Kafka created a session for every client that had one in the capture, and each was used incrementally
    captured = captured_counts(load_plan([CAPTURE])[0])
    assert len(created) == captured.totals.sessions_created > 0
    assert all(len(incremental.get(sid, [])) > 0 for sid in created)
    assert kafka_said.errors == [] and kafka_said.refused == []
    # every replayed fetch answered without a top-level or a partition error (no NOT_LEADER_OR_FOLLOWER from the
    # new topic, no OFFSET_OUT_OF_RANGE from its rebased offsets)
    fetches = mark.fetches(_client_ids())
    assert len(fetches) == report["totals"]["requests"]
    assert [f for f in fetches if f.error_code or f.partition_errors] == []
    assert all(f.api_version == 18 for f in fetches)

    # the report tells the same story Kafka logged
    totals = report["totals"]
    assert totals["sessions_created"] == len(created)
    assert totals["incremental_share"] > 0
    # (an incremental request that forgets every partition is logged as closing its session, not as a context)
    answered_incrementally = len(kafka_said.incremental) + len(kafka_said.emptied)
    assert round(answered_incrementally / totals["requests"], 4) == totals["incremental_share"]
    assert totals["errors"] == {} and totals["partition_errors"] == {} and report["divergence"] == []
    # and leaves none of its sessions in Kafka's cache (1 slot per shard here: one left would refuse the next)
    assert set(created) <= _closed(kafka_said)


def _close_session(port: int, session_id: int) -> None:
    """The competing client: a full Fetch (session_id, -1) with no partitions, which closes that session."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(fetch_request(18, 1, "competitor", session_id, -1, (), max_wait_ms=0))
        size = int.from_bytes(sock.recv(4, socket.MSG_WAITALL), "big")
        sock.recv(size, socket.MSG_WAITALL)


def test_a_competitor_closing_the_replayed_sessions_shows_as_70s_in_the_divergence_and_in_kafkas_log(kafka):
    node = kafka.nodes[0]
    mark = LogMark(node)
    replay = subprocess.Popen(_replay_command(node, "--speed", "4"), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    closed: list[int] = []
    try:
        # Watch Kafka's log for the replayed clients' sessions; close each one the moment it is in incremental
        # use, and wait for its client to run into the missing session before closing the next (3 at most).
        deadline = time.monotonic() + 60
        while replay.poll() is None and len(closed) < 3 and time.monotonic() < deadline:
            log = mark.sessions()
            missed = {e.session_id for e in log.errors}
            if closed and closed[-1] not in missed:
                time.sleep(0.05)
                continue
            used = log.incremental_by_id()
            gone = {f.removed_session for f in log.closed_by_full} | {e.session_id for e in log.emptied}
            victim = next((sid for sid in log.created_by_id()
                           if sid not in closed and sid not in gone and len(used.get(sid, [])) >= 2), None)
            if victim is None:
                time.sleep(0.05)
                continue
            _close_session(node.port, victim)
            closed.append(victim)
        out, err = replay.communicate(timeout=120)
    finally:
        if replay.poll() is None:
            replay.kill()
            replay.wait()
    assert replay.returncode == 0, err
    report = json.loads(out)

    kafka_said = mark.sessions()
    assert closed and set(closed) & {f.removed_session for f in kafka_said.closed_by_full}
    # every session error Kafka logged is a 70 for a session the competitor closed
    not_found = [e for e in kafka_said.errors if e.code == br.FETCH_SESSION_ID_NOT_FOUND]
    assert not_found and len(not_found) == len(kafka_said.errors)
    assert {e.session_id for e in not_found} <= set(closed)
    answered_70 = [f for f in mark.fetches(_client_ids()) if f.error_code == br.FETCH_SESSION_ID_NOT_FOUND]
    assert len(answered_70) == len(not_found)

    # the replay counted exactly the 70s Kafka logged, and its divergence section says the capture had none
    assert report["totals"]["errors"] == {"70": len(not_found)}
    assert report["captured"]["errors"] == {}
    divergence = report["divergence"]
    assert {(d["error"], d["captured"], d["direction"]) for d in divergence} == {(70, 0, "replay_only")}
    assert sum(d["replay"] for d in divergence) == len(not_found)
    # after each 70 the client started over with a new session, which Kafka created and the client used
    assert report["totals"]["sessions_created"] == len(kafka_said.created) > captured_counts(
        load_plan([CAPTURE])[0]).totals.sessions_created
    assert set(kafka_said.created_by_id()) <= _closed(kafka_said)  # none left to refuse the next test's sessions


def test_sessions_the_capture_left_open_are_closed_on_kafka_when_the_replay_ends(kafka):
    # The same consumers, cut before their close(): the capture ends with three sessions open, as any capture
    # taken while the consumers run does. Left open on Kafka they would hold 3 of the 8 shards for 120 s or more.
    from fetchtool.decoder import decode_capture
    from fetchtool.replay.driver import ReplayOptions, replay
    from fetchtool.replay.plan import build_plan

    running = [e for e in decode_capture([str(CAPTURE)])
               if not (getattr(e, "session_epoch", None) == -1 and getattr(e, "session_id", 0))]
    plan = build_plan(running)
    node = kafka.nodes[0]
    mark = LogMark(node)
    run = asyncio.run(replay(plan, ReplayOptions(broker=node.bootstrap, create_topics=True, as_fast=True)))

    kafka_said = mark.sessions()
    created = set(kafka_said.created_by_id())
    assert len(created) == run.closed_sessions == len(plan.streams)
    assert {f.removed_session for f in kafka_said.closed_by_full} == created
    assert kafka_said.errors == []
    assert any(f"closed {len(created)} session(s) still open" in n for n in run.notes)
