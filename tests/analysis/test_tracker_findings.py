"""Tracker and findings fed with Exchange objects directly (sans-IO): each test is a small fetch story."""

from __future__ import annotations

from dataclasses import replace

from builders import Capture

from fetchtool.analysis.run import analyze_items


def codes(a):
    return [(f.code, f.cause) for f in a.findings]


def test_session_life_counts_added_and_forgotten_partitions():
    c = Capture()
    c.fetch(epoch=0, partitions=(("t", 0, 0), ("t", 1, 0)), response_session_id=7)
    c.fetch(session_id=7, epoch=1, partitions=(("t", 2, 0),), response_session_id=7)
    c.fetch(session_id=7, epoch=2, partitions=(), forgotten=(("t", 0),), response_session_id=7)
    c.fetch(session_id=7, epoch=-1, partitions=())
    a = analyze_items(c.exchanges)
    [s] = a.sessions
    assert (s.first_partitions, s.max_partitions, s.partitions) == (2, 3, 2)
    assert [st.kind for st in s.steps] == ["full_create", "incremental", "incremental", "close"]
    assert [(st.added, st.forgotten) for st in s.steps[1:3]] == [(1, 0), (0, 1)]
    assert s.end == "closed" and s.last_epoch == 2
    [cl] = a.clients
    assert cl.request_kinds == {"full_create": 1, "incremental": 2, "close": 1}
    assert codes(a) == []


def test_session_survives_reconnect_and_is_per_broker():
    c = Capture()
    c.fetch(epoch=0, response_session_id=7, conn=1)
    c.fetch(session_id=7, epoch=1, response_session_id=7, conn=2, client="10.0.0.1:50001")
    c.fetch(epoch=0, response_session_id=7, conn=3, broker="10.0.0.8:9092")  # same id, other broker
    a = analyze_items(c.exchanges)
    assert len(a.sessions) == 2 and a.sessions[0].connections == 2
    [cl] = a.clients
    assert len(cl.addresses) == 2 and len(cl.brokers) == 2


def test_using_a_closed_session_is_closed_by_client():
    c = Capture()
    c.fetch(epoch=0, response_session_id=7)
    c.fetch(session_id=7, epoch=0, response_session_id=8)  # close 7, open 8
    bad = c.fetch(session_id=7, epoch=1, error=70)
    a = analyze_items(c.exchanges)
    [f] = a.findings
    assert (f.code, f.cause, f.request_frame) == ("FETCH_SESSION_ID_NOT_FOUND", "closed_by_client", bad.request_frame)
    assert f.severity == "error" and f.advice


def test_epoch_skip_and_unknown_epoch():
    c = Capture()
    c.fetch(epoch=0, response_session_id=7)
    c.fetch(session_id=7, epoch=3, error=71)  # the broker expects 1
    c.fetch(session_id=9, epoch=4, error=71)  # never seen: expected epoch unknown
    a = analyze_items(c.exchanges)
    assert codes(a) == [("INVALID_FETCH_SESSION_EPOCH", "epoch_skip"), ("INVALID_FETCH_SESSION_EPOCH", "unknown")]
    assert "capture starting earlier" in a.findings[1].message


def test_concurrent_request_on_another_connection_processed_first():
    # Request A (epoch 1) is answered with 71 because B, sent later on another connection, reached the broker first.
    c = Capture()
    c.fetch(epoch=0, response_session_id=7)
    a_ex = c.fetch(session_id=7, epoch=1, error=71, gap=3)
    b_ex = replace(a_ex, conn=2, request_frame=a_ex.request_frame + 1, response_frame=a_ex.request_frame + 2,
                   error_code=0, response_session_id=7, response_partitions=(), ts=a_ex.ts + 0.001)
    a = analyze_items([*c.exchanges, b_ex])
    assert codes(a) == [("INVALID_FETCH_SESSION_EPOCH", "concurrent_requests")]


def test_not_found_without_evidence_is_unknown_and_says_what_would_settle_it():
    c = Capture()
    c.fetch(epoch=0, response_session_id=7)
    c.fetch(session_id=7, epoch=1, response_session_id=7)
    c.fetch(session_id=7, epoch=2, error=70)
    a = analyze_items(c.exchanges)
    [f] = a.findings
    assert f.cause == "unknown" and "--cache-slots" in f.message


def test_topic_id_error_without_the_creating_request_is_unknown():
    c = Capture()
    c.fetch(session_id=7, epoch=5, version=12, error=106)
    assert codes(analyze_items(c.exchanges)) == [("FETCH_SESSION_TOPIC_ID_ERROR", "unknown")]


def test_refusals_by_a_broker_that_never_grants_make_one_info_finding():
    c = Capture(holds_empty_fetches=True)  # answering at once would add MAX_WAIT_IGNORED
    for _ in range(20):
        c.fetch(epoch=0, response_session_id=0)
    a = analyze_items(c.exchanges)
    [f] = a.findings
    assert (f.code, f.severity, f.count) == ("SESSIONS_NOT_GRANTED", "info", 20)


def test_response_over_max_bytes_allows_the_first_batch():
    c = Capture()
    c.fetch(max_bytes=100, partitions=(("t", 0, 0), ("t", 1, 0)), response=[("t", 0, 10, 500, 0), ("t", 1, 10, 0, 0)])
    assert codes(analyze_items(c.exchanges)) == []  # one oversized first batch: allowed (KIP-74)
    c.fetch(max_bytes=100, partitions=(("t", 0, 0), ("t", 1, 0)), response=[("t", 0, 10, 60, 0), ("t", 1, 10, 60, 0)])
    assert codes(analyze_items(c.exchanges)) == [("RESPONSE_OVER_MAX_BYTES", None)]


def test_unanswered_request_at_the_end_of_the_capture_is_not_missing():
    c = Capture()
    c.fetch(epoch=-1)
    c.fetch(epoch=-1, missing_response=True)
    assert codes(analyze_items(c.exchanges)) == []


def test_a_client_that_stops_asking_once_refused_fetches_sessionless_even_naming_its_old_session():
    """franz-go's story (captures/kafka/franz-refused.pcap): its session evicted, it asks again with (id, 0), is
    refused (a full cache: other clients hold sessions), and from then on sends (id, -1) on every fetch. Kafka
    removed the session at the (id, 0): each (id, -1) after it is a sessionless fetch, not a close, in the
    client's counts, the savings and the findings alike."""
    c = Capture()
    parts = tuple(("t", p, 0) for p in range(8))
    c.fetch(client="10.0.0.2:40000", conn=9, client_id="other", epoch=0, response_session_id=5)  # keeps the cache
    c.fetch(epoch=0, partitions=parts, response_session_id=7)
    c.fetch(session_id=7, epoch=1, partitions=(), response_session_id=7)
    c.fetch(session_id=7, epoch=2, partitions=(), error=70)
    refused = c.fetch(session_id=7, epoch=0, partitions=parts, software="kgo/v1.22.3")
    after = [c.fetch(session_id=7, epoch=-1, partitions=parts) for _ in range(20)]
    a = analyze_items(c.exchanges)
    cl = next(cl for cl in a.clients if cl.client_id == "consumer-1")
    assert cl.request_kinds == {"full_create": 1, "incremental": 2, "full": 1, "sessionless": 20}
    [f] = [f for f in a.findings if f.code == "SESSIONLESS_CLIENT"]
    assert (f.cause, f.count, f.request_frame) == ("after_refusal", 20, after[0].request_frame)
    assert f"fetch at frame {refused.request_frame}" in f.message and "configuration" not in f.message
    assert "franz-go stops asking" in f.message
    [mine] = [t for t in a.savings["per_client"] if t["client_id"] == "consumer-1"]
    assert mine["requests"]["sessionless"] == 20 and mine["potential_bytes"] > 0


def test_a_negative_session_id_with_epoch_minus_one_is_sessionless():
    """segmentio/kafka-go's Client.Fetch sends (-1, -1): Kafka's session ids are positive, so it names none."""
    c = Capture()
    for _ in range(3):
        c.fetch(session_id=-1, epoch=-1)
    a = analyze_items(c.exchanges)
    [cl] = a.clients
    assert cl.request_kinds == {"sessionless": 3}
    assert a.savings["per_client"][0]["requests"] == {"sessionless": 3}


def test_a_close_is_a_close_once():
    """Java's close at shutdown, (id, -1) after incremental fetches, stays a close; a client that had never named
    the session on that connection (a capture started mid-session) closes it too."""
    c = Capture()
    c.fetch(epoch=0, response_session_id=7)
    c.fetch(session_id=7, epoch=1, response_session_id=7)
    c.fetch(session_id=7, epoch=-1)
    c.fetch(session_id=9, epoch=-1, conn=2, client="10.0.0.1:50001")
    a = analyze_items(c.exchanges)
    [cl] = a.clients
    assert cl.request_kinds == {"full_create": 1, "incremental": 1, "close": 2}


def test_a_franz_go_client_sessionless_from_the_start_may_have_been_refused_before_the_capture():
    """(0, -1) from the first fetch is what franz-go sends with kgo.DisableFetchSessions() and also after a refusal
    long before the capture: the finding names both, not the configuration alone."""
    c = Capture()
    parts = tuple(("t", p, 0) for p in range(8))
    c.fetch(client="10.0.0.2:40000", conn=9, client_id="other", epoch=0, response_session_id=5)
    for _ in range(20):
        c.fetch(epoch=-1, partitions=parts, software="kgo/v1.22.3")
    a = analyze_items(c.exchanges)
    [f] = [f for f in a.findings if f.code == "SESSIONLESS_CLIENT"]
    assert f.cause is None
    assert "turned off in its configuration, or a broker refused it one before the capture began" in f.message
