"""replay holds what is in flight, not the whole capture (issue 19: peak RSS <= 300 MB for every command).

A replay of a 100,000-connection storm peaked at 1.3 GB: every step's reads held by the plan, a task, client
model and result per connection made at once, two dicts of timeline positions, and the report as one document.
Now the plan is built without reads and the replay takes what it needs of them in one walk (driver.captured_log),
streams start when the capture reaches them and let their planned fetches go once replayed (release_plan), and
the JSON report is written row by row. These tests hold the results to the ones the old way gives.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

import pytest

from fetchtool.decoder import decode_capture
from fetchtool.replay.driver import ReplayOptions, ReplayRun, _Sequencer, captured_log, replay
from fetchtool.replay.jsonout import Rows, json_text
from fetchtool.replay.plan import LATER, build_plan, every_read
from fetchtool.replay.report import replay_json
from fetchtool.replay.simulate import SimConfig

from .test_replay import cancelled_after

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
WITH_ERRORS = CAPTURES / "scenarios" / "partition-errors.pcap"


def _plans(capture: Path):
    """The capture's plan with held reads, and the one that makes them again from its spill (left open)."""
    held = build_plan(decode_capture([str(capture)]))
    spill = tempfile.TemporaryFile(prefix="fetchtool-test-plan-")
    later = build_plan(decode_capture([str(capture)]), spill, LATER)
    assert later.later_reads is not None
    return held, later, spill


def _masked(doc: dict) -> str:
    """The report without what a clock decides (round-trip times, elapsed time)."""
    def mask(o):
        if isinstance(o, dict):
            return {k: None if k in ("rtt_ms", "elapsed_s") else mask(v) for k, v in o.items()}
        return [mask(v) for v in o] if isinstance(o, list) else o
    return json.dumps(mask(json.loads("".join(json_text(doc)))), indent=1)


@pytest.mark.parametrize("capture", sorted(CAPTURES.glob("*.pcap*")) + [WITH_ERRORS], ids=lambda p: p.name)
def test_the_captured_log_of_a_plan_without_reads_is_the_one_its_held_reads_give(capture):
    held, later, spill = _plans(capture)
    with spill:
        a, b = captured_log(held), captured_log(later)
        assert (a.low, a.high, a.partition_errors) == (b.low, b.high, b.partition_errors)
        # every step's reads once, the same values
        assert sorted((i, j, dict(r)) for i, j, r in every_read(later)) == sorted(
            (i, j, dict(r)) for i, j, r in every_read(held))


def test_the_scenario_with_partition_errors_has_some_to_compare():
    held, later, spill = _plans(WITH_ERRORS)
    spill.close()
    assert captured_log(held).partition_errors


@pytest.mark.parametrize("capture", [CAPTURES / "kafka-python-tansu.pcap", WITH_ERRORS], ids=lambda p: p.name)
def test_a_replay_that_lets_its_plan_go_reports_what_one_with_the_whole_plan_held_does(capture):
    held, later, spill = _plans(capture)
    with spill:
        options = ReplayOptions(config=SimConfig(1000, 1, 120_000), as_fast=True)
        kept = asyncio.run(replay(held, options))
        released = asyncio.run(replay(later, ReplayOptions(config=options.config, as_fast=True, release_plan=True)))
    assert kept.finished and released.finished
    assert all(not s.fetches for s in later.streams)   # let go, stream by stream
    assert _masked(replay_json(kept, kept.captured)) == _masked(replay_json(released, released.captured))


def test_an_interrupted_replay_lists_every_stream_started_or_not():
    held, later, spill = _plans(CAPTURES / "kafka-python-tansu.pcap")
    spill.close()
    run = ReplayRun(held, ReplayOptions(speed=0.001))   # paced: the later streams never start
    cancelled_after(held, run, 1.0)
    assert not run.finished
    assert [r.stream.index for r in run.streams] == [s.index for s in held.streams]


def test_the_sequencer_keeps_no_position_already_passed():
    seq = _Sequencer()
    seq.mark(0, 2, -1)          # 2 waits for 1; -1: a response the capture does not have
    assert seq.next == 1 and seq.done == {2}
    seq.mark(1)
    assert seq.next == 3 and not seq.done
    seq.mark(0, 1, 2)           # a stream's end marks its every position again
    assert seq.next == 3 and not seq.done


def test_rows_equal_the_list_they_make():
    rows = Rows(3, lambda n: {"n": n})
    assert rows == [{"n": 0}, {"n": 1}, {"n": 2}] and rows == Rows(3, lambda n: {"n": n})
    assert rows != [{"n": 0}] and rows != Rows(3, lambda n: {"n": -n})
