"""The time series the HTML report draws: per-broker time buckets (tracking.timeline) and the shadow cache's
occupancy (diagnosis.occupancy), on real captures: bounded, independent of the order exchanges come in, equal
when the Spark engine's per-broker parts are merged, and consistent with the rest of the report."""

from __future__ import annotations

import random
from itertools import groupby
from math import floor
from pathlib import Path

import pytest

from fetchtool.analysis.diagnosis.occupancy import MAX_POINTS, thin
from fetchtool.analysis.reports.json_report import render
from fetchtool.analysis.run import analyze_capture, analyze_items
from fetchtool.analysis.tracking.timeline import FINEST_S, MAX_BUCKETS, TimelineTracker
from fetchtool.decoder import decode_capture
from fetchtool.exchange import FETCH, Exchange
from fetchtool.pipeline.spark_merge import analyze_broker, merge

KAFKA = Path(__file__).resolve().parents[2] / "captures" / "kafka"
NAMES = ["java-evictions.pcap", "cluster-followers.pcap", "java-broker-restart.pcap"]


@pytest.fixture(scope="module", params=NAMES)
def report(request) -> dict:
    return analyze_capture([KAFKA / request.param]).to_json()


def test_buckets_are_bounded_and_as_fine_as_the_span_allows(report):
    for b in report["brokers"]:
        tl = b["timeline"]
        n = len(tl["fetches"])
        assert 1 <= n <= MAX_BUCKETS
        assert tl["fetches"][0] > 0 and tl["fetches"][-1] > 0  # from the first fetch's bucket to the last's
        assert all(len(tl[k]) == n for k in ("errors", "partition_errors", "p50_ms", "p99_ms"))
        if tl["bucket_s"] > FINEST_S:  # half the width needed more than MAX_BUCKETS, i.e. at most 2n, buckets
            assert 2 * n > MAX_BUCKETS
        assert tl["start"] == floor(tl["start"] / tl["bucket_s"]) * tl["bucket_s"]  # on the fixed grid


def test_buckets_add_up_to_the_brokers_traffic(report):
    for b in report["brokers"]:
        tl = b["timeline"]
        assert sum(tl["fetches"]) == b["traffic"]["fetches"]
        assert sum(tl["errors"]) == sum(b["errors"].values())
        for p50, p99 in zip(tl["p50_ms"], tl["p99_ms"]):
            assert (p50 is None) == (p99 is None)
            assert p50 is None or p50 <= p99


def test_the_order_of_exchanges_does_not_change_the_timeline():
    items = [it for it in decode_capture([KAFKA / "cluster-followers.pcap"])
             if isinstance(it, Exchange) and it.api_key == FETCH]
    in_order, shuffled = TimelineTracker(), TimelineTracker()
    for it in items:
        in_order.feed(it)
    random.Random(7).shuffle(items)
    for it in items:
        shuffled.feed(it)
    assert len(in_order.timelines()) == 4
    assert shuffled.timelines() == in_order.timelines()


def test_per_broker_parts_give_the_one_pass_series():
    # The Spark engine's stage 3 and merge, without Spark: three brokers analysed apart.
    run = decode_capture([KAFKA / "cluster-followers.pcap"])
    items = list(run)
    one_pass = analyze_items(items, decode_report=run.report)
    keyed = sorted(((it.broker, (i,)), it) for i, it in enumerate(items))
    last_ts = max(t for it in items for t in (it.ts, getattr(it, "response_ts", None)) if t is not None)
    parts = [analyze_broker(broker, ((key, it) for (_b, key), it in group), last_ts)
             for broker, group in groupby(keyed, key=lambda kv: kv[0][0])]
    merged = merge(parts, run.report)
    assert [b.timeline for b in merged.brokers] == [b.timeline for b in one_pass.brokers]
    assert [b.cache_occupancy for b in merged.brokers] == [b.cache_occupancy for b in one_pass.brokers]
    assert render(merged) == render(one_pass)


def _at(series: dict, t: int) -> int:
    """A step series' value at time t (0 before its first point)."""
    value = 0
    for ti, n in zip(series["t_ms"], series["live"]):
        if ti > t:
            break
        value = n
    return value


def test_the_occupancy_peaks_at_the_brokers_max_live_sessions(report):
    shown = 0
    for b in report["brokers"]:
        oc = b["cache_occupancy"]
        if not oc["total"]["t_ms"]:
            assert b["max_live_sessions"] == 0
            continue
        shown += 1
        assert max(oc["total"]["live"]) == b["max_live_sessions"] > 0
        assert oc["total"]["t_ms"] == sorted(oc["total"]["t_ms"])
        if oc["per_shard"]:  # the shards add up to the whole cache after each millisecond's changes
            for t, n in dict(zip(oc["total"]["t_ms"], oc["total"]["live"])).items():
                assert sum(_at(s, t) for s in oc["per_shard"]) == n
            if oc["slots_per_shard"] is not None:
                assert all(max(s["live"]) <= oc["slots_per_shard"] for s in oc["per_shard"])
    assert shown


def test_the_evictions_capture_fills_every_shard_of_its_replayed_cache():
    (b,) = analyze_capture([KAFKA / "java-evictions.pcap"]).to_json()["brokers"]
    oc = b["cache_occupancy"]
    assert (oc["shards"], oc["slots_per_shard"]) == (8, 1)
    assert sorted(s["shard"] for s in oc["per_shard"]) == list(range(8))
    assert all(max(s["live"]) == 1 for s in oc["per_shard"])


def test_thinning_keeps_the_peak_and_the_last_point():
    rng = random.Random(3)
    points = [(t * 10, rng.randrange(100)) for t in range(20_000)]
    points[12_345] = (points[12_345][0], 1000)
    kept = thin(points)
    assert len(kept) <= MAX_POINTS
    assert (123_450, 1000) in kept and kept[-1] == points[-1]
    assert kept == sorted(kept) and set(kept) <= set(points)
    assert thin(points[:50]) == points[:50]
