"""The summaries a 100,000-connection client makes, as cheaply as the storm needs them and exactly as before:
a client's JSON object (field by field now, not dataclasses.asdict over every address) and the traffic of many
cells added up in one loop (not one TrafficStats.merge each)."""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import asdict

from fetchtool.analysis.model import JSON_LIST, ClientSummary
from fetchtool.analysis.tracking.traffic import TrafficStats, merged


def _client(connections: int) -> ClientSummary:
    return ClientSummary(
        client_id="storm-consumer", host="10.1.0.5",
        addresses=tuple(f"10.1.0.5:{40000 + i}" for i in range(connections)), brokers=("10.2.0.1:9092",),
        software=("apache-kafka-java/3.7.0",), fetch_versions={"v12": 3 * connections},
        request_kinds={"full_create": connections, "incremental": connections},
        exchanges=2 * connections, sessions=tuple(("10.2.0.1:9092", 1_000_000 + i) for i in range(connections)),
        errors={"70": 2})


def test_a_client_of_many_connections_keeps_its_json_object_key_for_key():
    for connections in (0, 3, JSON_LIST + 5):
        c = _client(connections)
        doc = c.to_json()
        # the object asdict made, with the lists cut to their first JSON_LIST as the report shows them
        whole = asdict(c)
        whole.pop("traffic")
        assert list(doc)[:len(whole)] == list(whole)
        assert doc["addresses"] == list(c.addresses[:JSON_LIST])
        assert doc["sessions"] == [{"broker": b, "session_id": s} for b, s in c.sessions[:JSON_LIST]]
        assert doc["client"] == (c.addresses[0] if c.addresses else c.host)
        assert {k: doc[k] for k in ("client_id", "host", "brokers", "software", "fetch_versions",
                                    "request_kinds", "exchanges", "errors")} == \
            {k: whole[k] if not isinstance(whole[k], tuple) else list(whole[k])
             for k in ("client_id", "host", "brokers", "software", "fetch_versions", "request_kinds", "exchanges",
                       "errors")}
        assert ("addresses_total" in doc) == (connections > JSON_LIST)
        doc["fetch_versions"]["v12"] = -1  # the report's copy, not the summary's own dict
        assert c.fetch_versions["v12"] == 3 * connections


def _cell(rng: random.Random) -> TrafficStats:
    st = TrafficStats()
    st.fetches = rng.randrange(0, 4)
    st.empty, st.checked, st.early = rng.randrange(3), rng.randrange(3), rng.randrange(2)
    if rng.random() < 0.8:
        st.first_ts = 1_700_000_000 + rng.random() * 100
        st.last_ts = None if rng.random() < 0.1 else st.first_ts + rng.random()
    for _ in range(rng.randrange(3)):
        st.latency.add(rng.randrange(-5, 40))
    return st


def test_many_cells_add_up_to_what_merging_them_one_by_one_gives():
    rng = random.Random(18)
    for n in (0, 1, 7, 3000):
        cells = [_cell(rng) for _ in range(n)]
        one_by_one = TrafficStats()
        for c in cells:
            one_by_one.merge(c)
        at_once = merged(cells)
        assert json.dumps(at_once.summary().to_json()) == json.dumps(one_by_one.summary().to_json())
        assert (at_once.first_ts, at_once.last_ts, at_once.latency.counts) == \
            (one_by_one.first_ts, one_by_one.last_ts, one_by_one.latency.counts)
        # and both are the plain sums, earliest and latest time of the cells
        times = [t for c in cells for t in (c.first_ts, c.last_ts) if t is not None]
        counts: Counter = Counter()
        for c in cells:
            counts.update(c.latency.counts)
        assert (at_once.fetches, at_once.empty, at_once.checked, at_once.early) == \
            (sum(c.fetches for c in cells), sum(c.empty for c in cells), sum(c.checked for c in cells),
             sum(c.early for c in cells))
        assert (at_once.first_ts, at_once.last_ts) == ((min(times), max(times)) if times else (None, None))
        assert at_once.latency.counts == {i: n for i, n in counts.items() if n}
