"""The replay plan: what each client wanted, when, and how it used sessions, rebuilt from a capture."""

from __future__ import annotations

import time

from fetchtool.replay.plan import ALWAYS_NEW, REQUEST, RESPONSE, SESSION, SESSIONLESS, build_plan
from fetchtool.sessions.partitions import TopicPartition

from .scenario import Consumer, req, resp


def test_incremental_requests_edit_the_wanted_set_like_the_clients_session():
    c = Consumer("10.0.0.9:50000")
    c.fetch(0.0, 0, 0, [req("orders", 0, 10), req("orders", 1, 20), req("orders", 2, 30)], response_session_id=7)
    # incremental: partition 1 moved on to offset 25, partition 2 forgotten, partition 3 added
    c.fetch(0.5, 7, 1, [req("orders", 3, 0), req("orders", 1, 25)], response=[], response_session_id=7,
            forgotten=[("orders", None, 2)])
    plan = build_plan(c.exchanges)
    (stream,) = plan.streams
    first, second = stream.fetches
    assert [w.tp for w in first.wanted] == [TopicPartition("orders", p) for p in (0, 1, 2)]
    # unchanged partitions keep their place; altered and added ones go to the end, as in FetchSessionHandler
    assert [(w.tp.partition, w.data.fetch_offset) for w in second.wanted] == [(0, 10), (3, 0), (1, 25)]
    assert (second.session_id, second.epoch, second.sent, second.forgotten) == (7, 1, 2, 1)
    assert second.t_ms == 500 and second.response_t_ms == 502


def test_reads_come_from_the_latest_captured_state_of_each_partition():
    a = Consumer("10.0.0.9:50000", conn=1)
    b = Consumer("10.0.0.8:50001", conn=2)
    a.fetch(0.0, 0, -1, [req("t", 0, 100)], response=[resp("t", 0, hw=150, records=4000)])
    # b's response is the latest knowledge of t-0 when a fetches again and its response leaves t-0 out
    b.fetch(1.0, 0, -1, [req("t", 0, 150)], response=[resp("t", 0, hw=180, records=900)])
    a.fetch(2.0, 0, -1, [req("t", 0, 150)], response=[])
    plan = build_plan(a.exchanges + b.exchanges)
    by_client = {s.client: s for s in plan.streams}
    first, again = by_client["10.0.0.9:50000"].fetches
    assert [(r.high_watermark, r.records_size) for r in first.reads.values()] == [(150, 4000)]
    assert [(r.high_watermark, r.records_size) for r in again.reads.values()] == [(180, 0)]
    assert plan.topics["t"].records_bytes == 4900
    assert plan.duration_ms == 2002


def test_session_behaviour_is_classified_as_captured():
    sarama = Consumer("10.0.0.1:1", conn=1)  # granted sessions, kept sending (0,0)
    for n in range(3):
        sarama.fetch(n, 0, 0, [req("t", 0)], response_session_id=100 + n)
    rdkafka = Consumer("10.0.0.2:2", conn=2)
    for n in range(3):
        rdkafka.fetch(n, 0, -1, [req("t", 0)])
    java = Consumer("10.0.0.3:3", conn=3)
    java.session_workload(55, "t", 2, 0.0, 1.0, 3)
    old = Consumer("10.0.0.4:4", conn=4, version=6)
    old.fetch(0, 0, -1, [req("t", 0)])
    plan = build_plan(sarama.exchanges + rdkafka.exchanges + java.exchanges + old.exchanges)
    assert {s.client: s.behaviour for s in plan.streams} == {
        "10.0.0.1:1": ALWAYS_NEW, "10.0.0.2:2": SESSIONLESS, "10.0.0.3:3": SESSION, "10.0.0.4:4": SESSIONLESS,
    }


def test_timeline_puts_a_response_before_a_request_at_the_same_instant():
    a = Consumer("10.0.0.9:50000", conn=1)
    a.fetch(0.0, 0, -1, [req("t", 0)], rtt=0.010)
    b = Consumer("10.0.0.8:50001", conn=2)
    b.fetch(0.010, 0, -1, [req("t", 0)], rtt=0.005)
    plan = build_plan(a.exchanges + b.exchanges)
    phases = [(t, phase) for t, phase, _i, _j in plan.timeline]
    assert phases == [(0, REQUEST), (10, RESPONSE), (10, REQUEST), (15, RESPONSE)]
    summary = plan.summary()
    assert summary["requests"] == 2 and summary["clients"] == 2 and summary["duration_s"] == 0.015


def test_a_storm_of_one_clients_connections_each_with_its_own_session_plans_in_seconds():
    """100,000 connections of one client (benchmarks/session_storm.py) took hours to plan: every connection was
    compared with every earlier one to find the connection it carries a session on from. 20,000 took 63 s (measured on
    e114008; this test fails there), now about 1 s."""
    exchanges = []
    for n in range(20_000):
        consumer = Consumer(f"10.1.0.5:{20000 + n % 40000}", conn=n)
        consumer.fetch(n * 0.01, 0, 0, [req("orders", n % 4)], response_session_id=1_000_000 + n)
        if n % 2:
            consumer.fetch(n * 0.01 + 0.005, 1_000_000 + n, 1, [], response=[], response_session_id=1_000_000 + n)
        exchanges += consumer.exchanges
    started = time.perf_counter()
    plan = build_plan(exchanges)
    took = time.perf_counter() - started
    assert len(plan.streams) == 20_000 and not any(s.follows is not None for s in plan.streams)
    assert took < 30, f"planning 20,000 connections took {took:.1f} s"   # about 1 s; generous for a loaded machine


def test_a_client_that_reconnects_with_the_session_it_held_follows_the_connection_that_ended_last():
    """Of a client's earlier connections that ended holding the session the new one opens with, the new one
    carries on from the one that ended last; a connection holding another session is not followed."""
    a, b, e, c, d = (Consumer(f"10.0.0.9:{40000 + k}", conn=k) for k in range(5))
    for consumer, t, session in ((a, 0.0, 7), (b, 0.02, 8), (e, 0.04, 7)):
        consumer.fetch(t, 0, 0, [req("orders", 0)], response_session_id=session)
        consumer.fetch(t + 0.01, session, 1, [], response=[], response_session_id=session)
    c.fetch(0.2, 7, 2, [], response=[], response_session_id=7, rtt=0.3)   # ends at 0.5 holding 7
    d.fetch(1.0, 7, 3, [], response=[], response_session_id=7)
    plan = build_plan(a.exchanges + b.exchanges + e.exchanges + c.exchanges + d.exchanges)
    by_client = {s.client: s for s in plan.streams}
    assert by_client[c.client].follows == by_client[e.client].index     # e ended after a
    assert by_client[d.client].follows == by_client[c.client].index
    assert [by_client[x.client].follows for x in (a, b, e)] == [None, None, None]
