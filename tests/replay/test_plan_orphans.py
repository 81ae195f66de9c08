"""A capture that starts mid-flight: responses whose requests were not captured are counted, not planned."""

from __future__ import annotations

from fetchtool.protocol.connection import OrphanResponse
from fetchtool.replay.plan import build_plan
from fetchtool.replay.simulate import SimConfig, simulate

from .scenario import Consumer, req


def test_orphan_responses_are_skipped_as_request_missing_and_the_rest_is_planned():
    consumer = Consumer("10.0.0.9:40009", conn=9)
    consumer.fetch(0.0, 0, 0, [req("orders", 0), req("orders", 1)], response_session_id=77)
    consumer.fetch(0.5, 77, 1, [], response=[], response_session_id=77)
    orphan = OrphanResponse(9, 1, 1_699_999_999.9, consumer.client, consumer.broker, 41, "scenario.pcap")
    plan = build_plan([orphan, *consumer.exchanges])
    assert plan.skipped == {"request_missing": 1}
    assert plan.requests == 2
    result = simulate(plan, SimConfig())
    assert result.totals.sessions_created == 1 and result.totals.incremental == 1
