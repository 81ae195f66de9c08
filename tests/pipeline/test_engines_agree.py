"""A client that fetches from two brokers gets one summary, whichever engine analysed the capture.

The Spark engine analyses each broker's exchanges apart (fetchtool.pipeline.spark_merge.analyze_broker) and
merges the parts on the driver; the polars engine sees every exchange in one pass (analyze_items). Lists and
dicts in a client summary that one pass orders by first sight must come out of the merge in the same order,
however the exchanges were split across brokers. The scenario interleaves the client's request kinds across
the brokers: a session on broker A, a sessionless fetch on broker B, then incremental fetches on A, so a merge
that orders by broker rather than by first sight gives a different report. The same holds for the decode
report, whose dicts Spark merges from per-partition parts (the clients' software, by where it was learnt).
"""

from __future__ import annotations

import json
from itertools import groupby
from pathlib import Path

import pytest

from fetchtool.analysis.reports.json_report import render
from fetchtool.analysis.run import analyze_capture, analyze_items
from fetchtool.decoder import decode_capture
from fetchtool.pipeline.spark import analyze_spark
from fetchtool.pipeline.spark_merge import analyze_broker, merge
from fetchtool.sessions import FetchMetadata
from fetchtool.synth.world import JavaLikeClient, World

CLIENT_ID = "consumer-a"


@pytest.fixture(scope="module")
def two_brokers(tmp_path_factory):
    """One client host (two connections, one client id) on brokers A and B; kinds first seen A, B, A."""
    path = tmp_path_factory.mktemp("two-brokers") / "two-brokers.pcap"
    w = World(path)
    a, b = w.broker("10.0.0.100"), w.broker("10.0.0.101")
    a_parts, b_parts = [("orders", 0), ("orders", 1)], [("payments", 0)]
    for broker, parts in ((a, a_parts), (b, b_parts)):
        for t, p in parts:
            broker.produce(t, p, 12)
    on_a = JavaLikeClient(w.connect(a, "10.0.0.1", 40001, CLIENT_ID), a_parts)
    on_b = w.connect(b, "10.0.0.1", 40002, CLIENT_ID)
    on_a.poll()  # creates a session on A
    on_b.fetch(FetchMetadata.LEGACY, {tp: 0 for tp in b_parts}, version=11)  # sessionless on B
    for _ in range(3):
        w.advance(0.2)
        on_a.poll()  # incremental on A
    w.close()
    return path


def _client(rep: str) -> list:
    """The client's summary as (field, value) pairs, values as the report writes them."""
    (client,) = [c for c in json.loads(rep)["clients"] if c["client_id"] == CLIENT_ID]
    return [(k, json.dumps(v)) for k, v in client.items()]


def test_the_scenario_interleaves_the_clients_request_kinds_across_brokers(two_brokers):
    rep = analyze_capture([two_brokers]).to_json()
    (client,) = rep["clients"]
    sessions = rep["sessions"]
    assert client["brokers"] == ["10.0.0.100:9092", "10.0.0.101:9092"]
    assert len(client["request_kinds"]) == 3  # a creating full fetch, a sessionless one, incremental ones
    assert [s["broker"] for s in sessions] == ["10.0.0.100:9092"]  # B's fetch made no session


def test_per_broker_parts_merge_into_the_one_pass_report(two_brokers):
    # The Spark engine's stage 3 and merge, without Spark: the items grouped by broker, keyed by request order.
    run = decode_capture([two_brokers])
    items = list(run)
    one_pass = render(analyze_items(items, decode_report=run.report))
    keyed = sorted(((it.broker, (i,)), it) for i, it in enumerate(items))
    last_ts = max(t for it in items for t in (it.ts, it.response_ts) if t is not None)
    parts = [analyze_broker(broker, ((key, it) for (_b, key), it in group), last_ts)
             for broker, group in groupby(keyed, key=lambda kv: kv[0][0])]
    assert len(parts) == 2
    # The part that starts later comes first: the merge must not lean on the order of the parts.
    merged = render(merge(parts[::-1], run.report))
    assert _client(merged) == _client(one_pass)
    assert merged == one_pass


@pytest.mark.spark
def test_spark_and_polars_give_the_same_report_for_a_client_on_two_brokers(spark, two_brokers):
    assert render(analyze_spark([two_brokers], spark=spark)) == render(analyze_capture([two_brokers]))


CAPTURES = Path(__file__).resolve().parents[2] / "captures"


@pytest.mark.spark
@pytest.mark.parametrize("name", ["kafka-python-tansu.pcap", "scenarios-real/kafka-python-cache-full.pcap"])
def test_the_decode_report_names_client_software_in_the_order_one_decode_learns_it(spark, name):
    # Several connections send ApiVersions; Spark decodes their flows in different partitions.
    polars = render(analyze_capture([CAPTURES / name]))
    assert len(json.loads(polars)["capture"]["decode"]["client_software"]) >= 2
    assert render(analyze_spark([CAPTURES / name], spark=spark)) == polars


@pytest.mark.parametrize("keep", [{"client": CLIENT_ID}, {"broker": "10.0.0.101:9092"},
                                  {"client": "10.0.0.1:40002"}])
def test_filtered_parts_merge_into_the_filtered_one_pass_report(two_brokers, keep):
    # --client / --broker counts (capture totals, broker and client counts, savings with one row per client)
    # are kept per part and added up on the driver: the same report as one filtered pass.
    from fetchtool.analysis.run import filtered, savings_filter

    run = decode_capture([two_brokers])
    items = list(run)
    only = savings_filter(keep.get("client"), keep.get("broker"))
    one_pass = filtered(analyze_items(items, decode_report=run.report, savings_of=only), **keep)
    keyed = sorted(((it.broker, (i,)), it) for i, it in enumerate(items))
    last_ts = max(t for it in items for t in (it.ts, it.response_ts) if t is not None)
    parts = [analyze_broker(broker, ((key, it) for (_b, key), it in group), last_ts, savings_of=only)
             for broker, group in groupby(keyed, key=lambda kv: kv[0][0])]
    merged = filtered(merge(parts[::-1], run.report), **keep)
    assert render(merged) == render(one_pass)
    assert one_pass.capture.filters == keep
    if keep != {"client": CLIENT_ID}:  # the scenario's one client: every exchange is kept
        assert one_pass.capture.exchanges < analyze_capture([two_brokers]).capture.exchanges


@pytest.mark.spark
def test_spark_and_polars_agree_on_a_filtered_report(spark, two_brokers):
    for keep in ({"client": CLIENT_ID}, {"broker": "10.0.0.100:9092"}):
        assert render(analyze_spark([two_brokers], spark=spark, **keep)) == render(analyze_capture([two_brokers],
                                                                                                   **keep))
