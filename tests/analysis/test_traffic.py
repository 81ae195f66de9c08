"""Fetch traffic and partition errors: the response-time sketch, the MaxWait check's exceptions (Kafka's
ReplicaManager.fetchMessages answers at once for them), re-fetch loops, partition errors that recover or persist,
and the per-broker parts of the Spark engine merging into the one-pass report on a real three-broker capture."""

from __future__ import annotations

import random
from itertools import groupby
from math import ceil
from pathlib import Path

import pytest

from builders import Capture
from fetchtool.analysis.reports.json_report import render
from fetchtool.analysis.run import analyze_items
from fetchtool.analysis.tracking.latency import RELATIVE_ERROR, LatencySketch, bucket
from fetchtool.decoder import decode_capture
from fetchtool.pipeline.spark_merge import analyze_broker, merge

CAPTURES = Path(__file__).resolve().parents[2] / "captures"


def _exact(values, q):
    s = sorted(values)
    return s[max(1, ceil(q * len(s))) - 1]


def test_sketch_quantiles_are_within_one_percent_and_parts_merge_to_the_whole():
    rng = random.Random(7)
    values = [rng.lognormvariate(3, 2) for _ in range(20_000)] + [0.0] * 50  # 0 ms: same-timestamp frames
    whole, parts = LatencySketch(), [LatencySketch() for _ in range(3)]
    for i, v in enumerate(values):
        whole.add(bucket(v))
        parts[i % 3].add(bucket(v))
    merged = LatencySketch()
    for p in parts:
        merged.merge(p)
    assert merged.counts == whole.counts and merged.n == len(values)
    for q in (0.01, 0.5, 0.9, 0.99):
        exact = _exact(values, q)
        assert abs(whole.quantile(q) - exact) <= RELATIVE_ERROR * exact + 1e-9, q
    assert len(whole.counts) < 2000  # bounded by the range of values, not by their number


def _empty_fetches(c: Capture, n: int, **kw):
    return [c.fetch(response=[("t", 0, 0, 0, 0)], **kw) for _ in range(n)]


def test_a_broker_that_answers_empty_fetches_at_once_is_called_out_once():
    c = Capture()  # answers in 5 ms, MaxWait 500
    _empty_fetches(c, 30, client="10.0.0.1:50000", client_id="a")
    _empty_fetches(c, 30, client="10.0.0.2:50000", client_id="b")
    a = analyze_items(c.exchanges)
    [f] = [f for f in a.findings if f.code == "MAX_WAIT_IGNORED"]
    assert f.count == 60 and f.client is None and f.broker == "10.0.0.9:9092" and f.request_frame == 1
    [b] = a.brokers
    assert b.traffic.max_wait_honoured is False and b.traffic.empty_share == 1.0


def test_a_broker_that_holds_empty_fetches_is_honoured():
    c = Capture(holds_empty_fetches=True)
    _empty_fetches(c, 30)
    a = analyze_items(c.exchanges)
    assert not [f for f in a.findings if f.code == "MAX_WAIT_IGNORED"]
    [b] = a.brokers
    assert b.traffic.max_wait_honoured is True and b.traffic.response_ms["p50"] == pytest.approx(500, rel=0.01)


@pytest.mark.parametrize("why, kw", [
    ("throttled", {"throttle": 100}),
    ("MinBytes 0: the client wants an answer even with no data", {"min_bytes": 0}),
    ("MaxWait 0: the client does not want to wait", {"max_wait_ms": 0}),
    ("no partitions: nothing to wait for", {"partitions": (), "response": []}),
])  # fmt: skip
def test_kafka_answers_at_once_without_it_being_a_fault(why, kw):
    c = Capture()
    for _ in range(30):
        c.fetch(**kw)
    a = analyze_items(c.exchanges)
    assert not [f for f in a.findings if f.code == "MAX_WAIT_IGNORED"], why
    assert a.brokers[0].traffic.max_wait_checked == 0


def test_a_full_fetch_of_no_partitions_naming_a_session_is_answered_at_once():
    """Kafka answers a fetch with no partitions to read at once (fetchInfos.isEmpty), even when it names a session
    that had partitions: the Java client's (id, 0) of nothing, seen on the real Kafka captures."""
    c = Capture()
    c.fetch(epoch=0, response_session_id=7, response=[("t", 0, 10, 100, 0)])  # records: answered at once
    for _ in range(30):
        c.fetch(session_id=7, epoch=0, partitions=(), response=[], response_session_id=7)
    a = analyze_items(c.exchanges)
    assert a.brokers[0].traffic.max_wait_checked == 0
    assert not [f for f in a.findings if f.code == "MAX_WAIT_IGNORED"]


def test_incremental_fetches_of_a_session_from_before_the_capture_are_checked():
    """Its partitions are unknown, but Kafka closes a session left empty (session id 0 in the answer): an answer
    that names the session had partitions to wait on."""
    c = Capture()
    for epoch in range(5, 35):
        c.fetch(session_id=9, epoch=epoch, partitions=(), response=[], response_session_id=9)
    a = analyze_items(c.exchanges)
    assert a.brokers[0].traffic.max_wait_checked == 30
    assert [f.code for f in a.findings if f.code == "MAX_WAIT_IGNORED"] == ["MAX_WAIT_IGNORED"]


def test_an_incremental_fetch_that_empties_its_session_is_answered_at_once():
    c = Capture(holds_empty_fetches=True)
    c.fetch(epoch=0, response_session_id=9, response=[("t", 0, 10, 100, 0)])
    c.fetch(session_id=9, epoch=1, partitions=(), forgotten=(("t", 0),), response=[], response_session_id=0)
    a = analyze_items(c.exchanges)
    assert a.brokers[0].traffic.max_wait_checked == 0


def test_a_client_polling_with_max_wait_zero_is_called_out_and_the_broker_is_not():
    c = Capture()
    for _ in range(25):
        c.fetch(max_wait_ms=0, client="10.0.0.5:50000", client_id="spinner")
    for _ in range(5):  # a one-shot reader: a handful of MaxWait 0 fetches is no loop
        c.fetch(max_wait_ms=0, client="10.0.0.6:50000", client_id="reader")
    a = analyze_items(c.exchanges)
    [f] = a.findings
    assert (f.code, f.client_id, f.count, f.request_frame) == ("MAX_WAIT_ZERO", "spinner", 25, 1)


def test_error_responses_are_not_empty_answers_to_hold():
    c = Capture()
    for _ in range(30):
        c.fetch(response=[("t", 0, -1, 0, 6)])  # NOT_LEADER_OR_FOLLOWER: Kafka answers at once
        c.t += 1.0  # a client that backs off: no loop either
    a = analyze_items(c.exchanges)
    assert [f.code for f in a.findings] == ["PARTITION_ERROR_PERSISTS"]
    assert a.brokers[0].traffic.max_wait_checked == 0 and a.brokers[0].traffic.empty_responses == 0


def test_a_quick_refetch_loop_on_errors_is_one_finding_with_its_length():
    c = Capture(holds_empty_fetches=True)
    _empty_fetches(c, 3)
    for _ in range(13):
        c.fetch(response=[("t", 0, -1, 0, 74), ("t", 1, -1, 0, 74)])  # re-sent 10 ms after each answer
    for _ in range(3):
        c.fetch(partitions=(("t", 0, 0), ("t", 1, 0)), response=[("t", 0, 0, 0, 0), ("t", 1, 0, 0, 0)])
    a = analyze_items(c.exchanges)
    [f] = [f for f in a.findings if f.code == "FETCH_ERROR_LOOP"]
    assert "FENCED_LEADER_EPOCH (74)" in f.message and "14 fetches" in f.message and f.count == 13
    assert not [f for f in a.findings if f.code == "PARTITION_ERROR_PERSISTS"]  # recovered
    rows = a.partition_errors
    assert [(r.partition, r.error_code, r.count, r.recovered) for r in rows] == [(0, 74, 13, True), (1, 74, 13, True)]


def test_a_short_burst_of_errors_is_not_a_loop():
    c = Capture(holds_empty_fetches=True)
    for _ in range(3):  # a leader change: a metadata refresh and two quick retries
        c.fetch(response=[("t", 0, -1, 0, 6)])
    _empty_fetches(c, 5)
    a = analyze_items(c.exchanges)
    assert not [f for f in a.findings if f.code in ("FETCH_ERROR_LOOP", "PARTITION_ERROR_PERSISTS")]
    assert [(r.error, r.recovered) for r in a.partition_errors] == [("NOT_LEADER_OR_FOLLOWER", True)]


def test_a_partition_failing_only_briefly_is_in_the_table_but_not_a_finding():
    c = Capture()
    for _ in range(4):  # four errors in 3 s: could still be a transition
        c.fetch(response=[("moving", 0, -1, 0, 6)])
        c.t += 1.0
    a = analyze_items(c.exchanges)
    assert not [f for f in a.findings if f.code == "PARTITION_ERROR_PERSISTS"]
    assert [(r.count, r.recovered) for r in a.partition_errors] == [(4, False)]


def test_the_partition_error_table_is_in_the_json_of_its_broker():
    c = Capture()
    for _ in range(3):
        c.fetch(response=[("gone", 0, -1, 0, 3)])
        c.t += 3.0
    d = analyze_items(c.exchanges).to_json()
    assert set(d) == {"capture", "brokers", "clients", "sessions", "findings", "savings"}
    [row] = d["brokers"][0]["partition_errors"]
    assert (row["topic"], row["partition"], row["error"], row["count"], row["recovered"]) == \
        ("gone", 0, "UNKNOWN_TOPIC_OR_PARTITION", 3, False)


def test_per_broker_parts_of_a_real_three_broker_capture_merge_into_the_one_pass_report():
    """cluster-followers: Java consumers and followers on three Kafka 4.3.1 brokers; every client's traffic is
    split across the brokers' parts and must add up to the one-pass figures, byte for byte."""
    path = CAPTURES / "kafka" / "cluster-followers.pcap"
    run = decode_capture([path])
    items = list(run)
    one_pass = render(analyze_items(items, decode_report=run.report))
    keyed = sorted(((it.broker, (i,)), it) for i, it in enumerate(items))
    last_ts = max(t for it in items for t in (it.ts, getattr(it, "response_ts", None)) if t is not None)
    parts = [analyze_broker(broker, ((key, it) for (_b, key), it in group), last_ts)
             for broker, group in groupby(keyed, key=lambda kv: kv[0][0])]
    assert len(parts) >= 3
    merged = render(merge(parts[::-1], run.report))
    assert '"traffic"' in merged
    assert merged == one_pass


def test_the_reports_show_traffic_and_partition_errors_within_80_columns():
    import io

    from rich.console import Console

    from fetchtool.analysis.reports import markdown, terminal
    from fetchtool.analysis.run import analyze_capture

    a = analyze_capture([CAPTURES / "scenarios" / "partition-errors.pcap"])
    buf = io.StringIO()
    terminal.render(a, Console(file=buf, width=80))
    text = buf.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "Fetch traffic" in text and "p50/p99 ms" in text
    assert "Partition errors: stale-consumer@10.0.6.1 -> 10.0.0.100:9092" in text
    assert "UNKNOWN_TOPIC_OR_PARTITION (3)" in text and "NOT_LEADER_OR_FOLLOWER (6)" in text
    md = markdown.render(a)
    assert "## Fetch traffic" in md and "## Partition errors (4)" in md
    assert "| gone-0 | UNKNOWN_TOPIC_OR_PARTITION (3) | 4 | NO |" in md
    assert "| orders-1 | NOT_LEADER_OR_FOLLOWER (6) | 1 | yes |" in md


def test_a_client_filter_keeps_the_finding_about_its_broker():
    from fetchtool.analysis.run import analyze_capture

    path = CAPTURES / "scenarios" / "max-wait-ignored.pcap"
    assert [f.code for f in analyze_capture([path], client="idle-1").findings] == ["MAX_WAIT_IGNORED"]
    assert analyze_capture([path], client="idle-3").findings == ()  # its broker holds empty fetches
