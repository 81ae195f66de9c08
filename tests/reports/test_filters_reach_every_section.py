"""--client and --broker keep every section of the report to the exchanges they name: the capture totals, each
broker's counts (under --client: that client's exchanges with it), each client's (under --broker: its
exchanges with that broker), sessions, findings and savings; and the report says which filter applies
(issue #17: a client with 82 fetches showed "Exchanges: 551" and "from 2 client(s)").

The expected figures come from the decoded exchanges themselves, not from the analysis."""

from __future__ import annotations

from fetchtool.decoder import decode_capture
from fetchtool.exchange import Exchange
from fetchtool.analysis.run import concerns

from .rendered import CAPTURES, analysis, analyze_text, markdown_text

EVICTIONS = next(p for p in CAPTURES if p.name == "java-evictions.pcap")
FOLLOWERS = next(p for p in CAPTURES if p.name == "cluster-followers.pcap")


def _exchanges(path, client=None, broker=None) -> list[Exchange]:
    return [ex for ex in decode_capture([str(path)]) if isinstance(ex, Exchange) and concerns(ex, client, broker)]


def test_client_filter_counts_only_that_clients_exchanges_everywhere():
    mine = _exchanges(EVICTIONS, client="java-small-0")
    assert 0 < len(mine) < len(_exchanges(EVICTIONS))
    a = analysis(EVICTIONS, client="java-small-0")
    c = a.capture
    assert c.exchanges == len(mine) and c.filters == {"client": "java-small-0"}
    assert c.request_bytes == sum(ex.request_bytes for ex in mine)
    assert c.response_bytes == sum(ex.response_bytes or 0 for ex in mine)
    (broker,) = a.brokers
    assert broker.exchanges == len(mine) and broker.clients == 1
    assert broker.sessions_created == len([s for s in a.sessions if not s.started_before_capture]) == 1
    # the broker refused this client's session-creating fetches: CACHE_FULL counts the same ones
    (cache_full,) = [f for f in a.findings if f.code == "CACHE_FULL"]
    assert broker.refused_creations == cache_full.count
    assert all(f.client_id in (None, "java-small-0") for f in a.findings)
    assert a.savings["total"]["exchanges"] == len(mine)
    assert [p["client_id"] for p in a.savings["per_client"]] == ["java-small-0"]


def test_the_report_says_which_filter_applies_and_shows_the_filtered_counts():
    a = analysis(EVICTIONS, client="java-small-0")
    n = f"{a.capture.exchanges:,}"
    for out in (analyze_text(a, 80), markdown_text(a)):
        assert "--client java-small-0" in out
        assert f"xchanges: {n} (" in out and "2,627" not in out  # the whole capture's count is not shown
    assert f"{n} exchanges, 1 client," in analyze_text(a, 200)


def test_broker_filter_counts_a_clients_exchanges_with_that_broker_only():
    everyone = analysis(FOLLOWERS)
    (java,) = [c for c in everyone.clients if c.client_id == "java-c1"]
    assert len(java.brokers) == 3
    broker = java.brokers[1]
    with_it = _exchanges(FOLLOWERS, client="java-c1", broker=broker)
    a = analysis(FOLLOWERS, broker=broker)
    (kept,) = [c for c in a.clients if c.client_id == "java-c1"]
    assert kept.exchanges == len(with_it) < java.exchanges
    assert kept.brokers == (broker,) and set(kept.addresses) == {ex.client for ex in with_it}
    assert sum(kept.request_kinds.values()) == len(with_it)
    assert all(b == broker for b, _sid in kept.sessions)
    assert a.capture.exchanges == len(_exchanges(FOLLOWERS, broker=broker))
    assert [b.broker for b in a.brokers] == [broker]


def test_client_filter_keeps_only_the_brokers_the_client_fetched_from():
    a = analysis(FOLLOWERS, client="java-c1")
    mine = _exchanges(FOLLOWERS, client="java-c1")
    assert {b.broker for b in a.brokers} == {ex.broker for ex in mine}
    for b in a.brokers:
        assert b.exchanges == sum(1 for ex in mine if ex.broker == b.broker)
        assert b.clients == 1


def test_savings_lists_a_client_once_with_its_connections_as_analyze_does():
    a = analysis(FOLLOWERS)
    (java,) = [c for c in a.clients if c.client_id == "java-c1"]
    rows = [p for p in a.savings["per_client"] if p["client_id"] == "java-c1"]
    assert len(rows) == 1  # was one row per connection
    (row,) = rows
    assert row["host"] == java.host and sorted(row["addresses"]) == sorted(java.addresses)
    assert row["client"] == row["addresses"][0]  # the contract's ip:port: the first connection
    keys = [(p["host"], p["client_id"]) for p in a.savings["per_client"]]
    assert len(keys) == len(set(keys))
