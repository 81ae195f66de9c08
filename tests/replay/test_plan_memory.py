"""The plan of a capture holds what a replay needs, not the capture: simulate and replay --dry-run on a 1.1 GB
capture peaked at 790 MB while they kept every decoded exchange until the plan was built (issue 19).

build_plan reads the exchanges once for their place in time, spilling their partitions to a file, and reads
the spill back in response order: by the end of the first pass only the exchange in hand is still alive.
"""

from __future__ import annotations

import tempfile
import tracemalloc
from pathlib import Path

from fetchtool.decoder import decode_capture
from fetchtool.exchange import Exchange
from fetchtool.replay.plan import build_plan

from .scenario import Consumer, req, resp

CAPTURE = Path(__file__).resolve().parents[2] / "captures" / "kafka" / "cluster-followers.pcap"


def _plan_fields(plan) -> list:
    return [(s.client, s.broker, s.behaviour, s.follows,
             [(f.t_ms, f.response_t_ms, f.session_id, f.epoch, f.sent, f.records_bytes, f.wanted,
               list(f.reads.items()), f.reads.changed) for f in s.fetches]) for s in plan.streams]


def _traced(run) -> tuple[int, object]:
    """Bytes allocated and still held when ``run`` returns (tracemalloc), and what it returned."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        out = run()
        return tracemalloc.get_traced_memory()[0] - before, out
    finally:
        tracemalloc.stop()


def test_planning_a_capture_does_not_keep_its_decoded_exchanges():
    # 400 fetches of 300 partitions from 4 consumers, each exchange made when the plan asks for the next one (as
    # the decoder streams them); every response carries every partition with a new high watermark.
    held = {}

    def items():
        clients = [Consumer(f"10.0.0.{n}:5000{n}", conn=n) for n in range(4)]
        for k in range(100):
            for c in clients:
                c.fetch(k * 0.5, 0, -1, [req("t", p, 1000 * k) for p in range(300)],
                        response=[resp("t", p, hw=1000 * (k + 1), records=10) for p in range(300)])
                yield c.exchanges.pop()
        held["first pass"] = tracemalloc.get_traced_memory()[0] - held["start"]

    def exchanges_kept():
        return list(items())

    def plan():
        held["start"] = tracemalloc.get_traced_memory()[0]
        with tempfile.TemporaryFile() as spill:
            return build_plan(items(), spill)

    held["start"] = 0
    exchanges_size, exchanges = _traced(exchanges_kept)
    _, planned = _traced(plan)
    assert planned.requests == len(exchanges) == 400
    # measured: 0.4 MB at the end of the first pass; 47 MB, every exchange, when build_plan kept them
    assert held["first pass"] < exchanges_size / 10


def test_a_plan_spilled_to_a_file_is_the_plan_of_the_exchanges_kept_in_memory():
    exchanges = list(decode_capture([str(CAPTURE)]))
    with tempfile.TemporaryFile() as spill:
        spilled = build_plan(iter(exchanges), spill)
    kept = build_plan(exchanges)
    assert spilled.timeline == kept.timeline
    assert spilled.topics == kept.topics and list(spilled.topics) == list(kept.topics)
    assert _plan_fields(spilled) == _plan_fields(kept)


def test_exchanges_given_connection_by_connection_give_the_plan_of_the_capture():
    # The second pass holds an exchange until its response's turn: a connection's every exchange given before the
    # next connection's (its last answer long after the others' first) plans as the capture's order does.
    exchanges = [x for x in decode_capture([str(CAPTURE)]) if isinstance(x, Exchange)]
    by_connection: dict[int, list[Exchange]] = {}
    for x in exchanges:
        by_connection.setdefault(x.conn, []).append(x)
    grouped = [x for group in by_connection.values() for x in group]
    assert grouped != exchanges and len(by_connection) > 2
    one, other = build_plan(grouped), build_plan(exchanges)
    assert one.timeline == other.timeline
    assert _plan_fields(one) == _plan_fields(other)


def test_a_dry_run_plan_without_reads_has_the_shape_of_the_full_plan():
    # replay --dry-run prints streams, requests, partitions and topics: a plan built without the steps' reads
    # (most of a plan's memory) says the same.
    exchanges = list(decode_capture([str(CAPTURE)]))
    full, shape = build_plan(exchanges), build_plan(exchanges, with_reads=False)
    assert shape.summary() == full.summary() and shape.timeline == full.timeline
    assert not any(f.reads for s in shape.streams for f in s.fetches)
    assert sum(len(f.reads) for s in full.streams for f in s.fetches) > 1000
