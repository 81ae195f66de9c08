"""Cache pressure on real Kafka 4.3.1 brokers (captures/kafka/): what fetchtool tells a support engineer about a
full fetch-session cache, held to what the broker's own log says happened in it.

Kafka's side: sessions.log replayed (created, removed by a full request, emptied, evicted; a SIGKILLed node
restarts empty) gives the live sessions at every moment; "No fetch session created" lines are the refusals, and
the request log says whose full fetch each refusal answered (epoch 0, response session id 0, no error).
fetchtool's side: `fetchtool analyze --format json` (brokers' max_live_sessions and refused_creations, the
CACHE_FULL, EVICTION_PRESSURE and SESSION_CHURN findings).

Disagreements are strict xfails with both sides in the reason (KNOWN_DISAGREEMENTS).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path

import pytest

import broker_record as br
from test_verdicts_sessions import BOUNDARY_S, analyze_json, captures, run_of

KNOWN_DISAGREEMENTS: dict[tuple[str, str], str] = {}


def per_capture(test_name: str):
    caps = captures()
    if not caps:
        return [pytest.param(None, marks=pytest.mark.skip(reason="no captures/kafka/*.pcap committed yet"))]
    out = []
    for c in caps:
        name = c.name.split(".pcap")[0]
        reason = KNOWN_DISAGREEMENTS.get((test_name, name))
        out.append(pytest.param(c, id=name, marks=[pytest.mark.xfail(strict=True, reason=reason)] if reason else []))
    return out


def refusals_by_client(run: br.RecordedRun, slack: float = 0.0) -> Counter:
    """(broker, client id) -> full fetches Kafka answered with session id 0 after refusing them a session, inside
    the capture window narrowed (slack < 0) or widened (slack > 0) by a few log ticks."""
    first, last = run.window
    return Counter((f.broker, f.client_id) for f in run.record.fetches
                   if f.session_epoch == 0 and f.response_session_id == 0 and f.error_code == 0
                   and not f.is_follower and first - slack <= f.received_ts and f.ts <= last + slack)


@pytest.mark.parametrize("capture", per_capture("test_every_refused_session_is_a_cache_full_finding_for_its_client"))
def test_every_refused_session_is_a_cache_full_finding_for_its_client(capture):
    run = run_of(capture)
    first, last = run.window
    theirs = refusals_by_client(run)
    # Kafka's two records agree: one "No fetch session created" line per such response
    refused_lines = sum(1 for log in run.sessions.values() for r in log.refused
                        if not r.privileged and first <= r.ts <= last)
    assert abs(sum(theirs.values()) - refused_lines) <= 2, (sum(theirs.values()), refused_lines)  # window edges
    mine = Counter()
    for f in analyze_json(capture)["findings"]:
        if f["code"] == "CACHE_FULL":
            mine[(f["broker"], f["client_id"])] += f["count"]
    # a refusal answered within a log tick of the capture's edges may be on either side of it
    at_least, at_most = refusals_by_client(run, -BOUNDARY_S), refusals_by_client(run, +BOUNDARY_S)
    if at_least == at_most:
        assert mine == theirs
    else:
        wrong = {k: (mine[k], at_least[k], at_most[k]) for k in mine.keys() | at_most.keys()
                 if not at_least[k] <= mine[k] <= at_most[k]}
        assert not wrong, f"CACHE_FULL count (fetchtool, Kafka's refusals at least, at most): {wrong}"


@pytest.mark.parametrize("capture", per_capture("test_fetchtool_sees_no_more_live_sessions_than_kafkas_cache_held"))
def test_fetchtool_sees_no_more_live_sessions_than_kafkas_cache_held(capture):
    run = run_of(capture)
    first, last = run.window
    theirs = {run.node_broker[n]: run.live_sessions_peak(n, first, last) for n in run.sessions}
    mine = {b["broker"]: b["max_live_sessions"] for b in analyze_json(capture)["brokers"]}
    over = {b: (n, theirs.get(b, 0)) for b, n in mine.items() if n > theirs.get(b, 0)}
    assert not over, f"max live sessions (fetchtool, Kafka's cache): {over}"


def check_eviction_pressure(capture: Path, told_cache: bool) -> None:
    run = run_of(capture)
    # Kafka: victims evicted by size ("Evicting EvictableKey[...]") that their client used again (a 70 for them in
    # the request log), and their evictors' owners. A session evicted as stale ("Evicting stale FetchSession") was
    # idle for 120 s: its 70 is told as such, with advice about the idle client, not about the cache size.
    owners = run.record.owners()
    errors = {(f.broker, f.session_id) for f in run.record.fetches if f.error_code == 70}
    victims: dict[str, list[br.Eviction]] = defaultdict(list)
    for e in run.record.all_evictions:
        broker = run.node_broker[e.node]
        if (broker, e.victim_id) in errors and not e.stale:
            victims[broker].append(e)
    if not victims:
        pytest.skip(f"no session Kafka evicted was used again in {run.name}")
    report = analyze_json(capture, run.cache_slots, run.cache_shards) if told_cache else analyze_json(capture)
    pressure = {f["broker"]: f for f in report["findings"] if f["code"] == "EVICTION_PRESSURE"}
    for broker, evictions in victims.items():
        assert broker in pressure, f"no EVICTION_PRESSURE for {broker}; Kafka evicted {len(evictions)} in-use sessions"
        f = pressure[broker]
        assert f["count"] == len(evictions)
        named = set(re.findall(r"(\S+@\d+\.\d+\.\d+\.\d+:\d+) \(\d+\)", f["message"]))
        evictors = {f"{owners[(broker, e.evictor.session_id)].client_id}@"
                    f"{owners[(broker, e.evictor.session_id)].client}" for e in evictions if e.evictor}
        assert named == evictors or (len(named) == 5 and named <= evictors), (named, evictors)


@pytest.mark.parametrize("capture", per_capture(
    "test_a_broker_that_evicted_sessions_still_in_use_is_reported_under_eviction_pressure"))
def test_a_broker_that_evicted_sessions_still_in_use_is_reported_under_eviction_pressure(capture):
    check_eviction_pressure(capture, told_cache=False)


@pytest.mark.parametrize("capture", per_capture(
    "test_a_broker_that_evicted_sessions_still_in_use_is_reported_under_eviction_pressure_given_the_cache_size"))
def test_a_broker_that_evicted_sessions_still_in_use_is_reported_under_eviction_pressure_given_the_cache_size(
        capture):
    check_eviction_pressure(capture, told_cache=True)


@pytest.mark.parametrize("capture", per_capture("test_a_client_whose_sessions_kafka_never_saw_used_is_session_churn"))
def test_a_client_whose_sessions_kafka_never_saw_used_is_session_churn(capture):
    """SESSION_CHURN: Kafka created several sessions for one client and never got an incremental fetch for any of
    them (no "incremental FetchContext" line); the finding counts those sessions, and a client whose sessions
    Kafka saw used is never called churning."""
    run = run_of(capture)
    first, last = run.window
    owners = run.record.owners()
    used = {(run.node_broker[c.node], c.session_id) for c in run.record.all_incremental}
    per_client: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for c in run.record.all_created:
        key = (run.node_broker[c.node], c.session_id)
        if first <= c.ts <= last and key in owners and not owners[key].is_follower:
            per_client[(key[0], owners[key].client_id)].append(key in used)
    churning = {k: len(v) for k, v in per_client.items() if len(v) >= 3 and not any(v)}
    mine = {(f["broker"], f["client_id"]): f["count"] for f in analyze_json(capture)["findings"]
            if f["code"] == "SESSION_CHURN"}
    healthy = {k for k, v in per_client.items() if any(v)}
    assert not (mine.keys() & healthy), f"SESSION_CHURN for clients whose sessions Kafka saw used: {mine}"
    # SESSION_CHURN counts the client's sessions never used; it may also name a client with fewer unused sessions
    # that keeps being refused (session_use.CHURN_REQUESTS), but never one with a session Kafka saw used
    assert {k: mine.get(k) for k in churning} == churning, (
        f"SESSION_CHURN (fetchtool) {mine} vs Kafka's unused sessions per client {churning}")
    assert all(k in per_client and mine[k] == len(per_client[k]) for k in mine), (mine, dict(per_client))


@pytest.mark.parametrize("capture", per_capture(
    "test_a_sessionless_client_gave_up_after_a_refusal_exactly_where_kafka_refused_it_first"))
def test_a_sessionless_client_gave_up_after_a_refusal_exactly_where_kafka_refused_it_first(capture):
    """SESSIONLESS_CLIENT's cause is after_refusal when, in Kafka's request log, the client's first sessionless
    fetch (0, -1) to that broker came after Kafka refused it a session (epoch 0 answered with session id 0), and
    null otherwise: such a client is told what its software does once refused, not to look at its configuration."""
    run = run_of(capture)
    first, last = run.window
    findings = [f for f in analyze_json(capture)["findings"] if f["code"] == "SESSIONLESS_CLIENT"]
    for f in findings:
        fetches = sorted((r for r in run.record.fetches if r.broker == f["broker"] and r.client_id == f["client_id"]
                          and first <= r.received_ts and r.ts <= last), key=lambda r: r.received_ts)
        refused = [r.received_ts for r in fetches
                   if r.session_epoch == 0 and r.response_session_id == 0 and r.error_code == 0]
        # Kafka answers (id, -1) as a sessionless fetch when it holds no session id: never created, evicted, or
        # removed by an earlier full request naming it (franz-go, once refused, sends (its last id, -1) every time)
        node = run.session_node(f["broker"])
        sessionless = [r.received_ts for r in fetches if r.session_epoch == -1
                       and not run.session_held(node, r.session_id or 0, r.received_ts)]
        assert sessionless, f"Kafka logged no sessionless fetch of {f['client_id']} to {f['broker']}"
        kafka = "after_refusal" if refused and refused[0] < sessionless[0] else None
        assert f["cause"] == kafka, (f["client_id"], f["cause"], refused[:1], sessionless[:1])
        if kafka:
            assert "configuration" not in f["message"], f["message"]
    if run.name == "franz-refused":  # the capture made for it: a newcomer, and franz-c3 after its 70 ((id, -1) then)
        assert {f["client_id"] for f in findings if f["cause"] == "after_refusal"} == {"franz-newcomer", "franz-c3"}

