"""Damaged streams as scenarios: a size prefix the stream does not bear out, a null Topics array, a version the
codec does not know. One bad frame is one counted warning naming it; every other exchange is still decoded and
no phantom request is invented from the damaged frame's body."""

from struct import pack

from kafka_wire import BROKER, Link, fetch_request, fetch_response, request_frame, response_frame

from fetchtool.capture.events import Endpoint
from fetchtool.decoder import decode_events
from fetchtool.exchange import Exchange
from fetchtool.protocol import codec
from fetchtool.protocol.connection import OrphanResponse
from fetchtool.protocol.report import DecodeReport


def run(events):
    rep = DecodeReport()
    return list(decode_events(events, "cap.pcap", None, rep)), rep


def consumer(L, first_corr=1, n=5, damage=None):
    """A consumer's ApiVersions then `n` Fetch round trips; `damage(i, frame_bytes)` may rewrite Fetch i."""
    ev = L.send(request_frame(18, 3, first_corr - 1, codec.ClientSoftware("kafka-python", "3.0.12")))
    ev += L.reply(response_frame(18, 3, first_corr - 1, bytes(7)))
    for i in range(n):
        corr = first_corr + i
        raw = request_frame(1, 12, corr, fetch_request(n=3 + i))
        ev += L.send(damage(i, raw) if damage else raw)
        ev += L.reply(response_frame(1, 12, corr, fetch_response(n=3 + i)))
    return ev


def test_an_absurd_size_prefix_loses_one_request_and_framing_resumes_at_the_next():
    L = Link()
    ev = consumer(L, damage=lambda i, raw: pack(">i", 0x7FFFFFFF) + raw[4:] if i == 1 else raw)
    bad_frame = ev[4].frame  # the second Fetch request
    items, rep = run(ev)
    fetches = [x for x in items if isinstance(x, Exchange)]
    assert [x.correlation_id for x in fetches] == [1, 3, 4, 5]
    assert all(x.response_frame is not None and x.partitions == x.response_partition_count for x in fetches)
    assert [x.correlation_id for x in items if isinstance(x, OrphanResponse)] == [2]  # its response, unasked
    assert set(rep.requests) == {(18, 3), (1, 12)}  # no phantom Produce or other API from the body's bytes
    assert rep.warnings == {"bad_frame_size": 1}
    (msg,) = rep.warning_examples["bad_frame_size"]
    assert msg.startswith(f"frame {bad_frame}: request from 10.0.0.1:51000 has size prefix 2,147,483,647")
    assert f"framing resumed at frame {ev[6].frame}" in msg


def test_a_plausible_but_wrong_size_is_proved_wrong_by_the_broker_answering():
    # the prefix claims 64 KB: the framer waits for bytes that never come, until the broker answers that very
    # request: it ended with the bytes the client sent before waiting
    L = Link()
    ev = consumer(L, damage=lambda i, raw: pack(">i", 65536) + raw[4:] if i == 2 else raw)
    items, rep = run(ev)
    fetches = [x for x in items if isinstance(x, Exchange)]
    assert [(x.correlation_id, x.partitions, x.response_partition_count) for x in fetches] == [
        (c, c + 2, c + 2) for c in (1, 2, 3, 4, 5)]
    assert rep.orphan_responses == 0 and rep.warnings == {"bad_frame_size": 1}
    assert rep.warning_examples["bad_frame_size"][0].startswith(f"frame {ev[6].frame}: request from")


def test_pipelined_requests_inside_a_wrong_size_are_recovered():
    L = Link()
    a, b = (request_frame(1, 12, c, fetch_request(n=2)) for c in (1, 2))
    ev = L.send(request_frame(18, 3, 0, codec.ClientSoftware("kafka-python", "3.0.12")))
    ev += L.reply(response_frame(18, 3, 0, bytes(7)))
    ev += L.send(pack(">i", 4000) + a[4:] + b)  # a's prefix swallows b
    ev += L.reply(response_frame(1, 12, 1, fetch_response(n=2)) + response_frame(1, 12, 2, fetch_response(n=2)))
    items, rep = run(ev)
    assert [(x.correlation_id, x.response_partition_count) for x in items] == [(1, 2), (2, 2)]
    assert rep.warnings == {"bad_frame_size": 1}


def test_a_stream_that_never_resyncs_says_so_once():
    L = Link()
    ev = consumer(L, n=2, damage=lambda i, raw: pack(">i", -5) + raw[4:] + b"\x00" * 40 if i == 1 else raw)
    ev.append(L.close())
    items, rep = run(ev)
    assert [x.correlation_id for x in items if isinstance(x, Exchange)] == [1]
    assert "no frame start found before the stream ended" in rep.warning_examples["bad_frame_size"][0]


def test_a_fetch_with_null_topics_is_one_malformed_request_among_good_exchanges():
    L = Link()
    null_topics = pack(">iiiibii", -1, 500, 1, 1000, 0, 0, 0) + b"\x00" + b"\x01" + b"\x01\x00" + b"\x00"
    ev = consumer(L, n=3, damage=lambda i, raw: raw if i != 1 else request_frame(1, 12, 2, null_topics))
    items, rep = run(ev)
    assert [(x.correlation_id, x.partitions) for x in items] == [(1, 3), (2, 0), (3, 5)]
    assert items[1].max_wait_ms is None and items[1].response_partition_count == 4  # its response still read
    assert rep.warnings == {"malformed_request": 1}
    assert "Topics is null" in rep.warning_examples["malformed_request"][0]


def test_an_unknown_api_versions_version_is_unsupported_not_malformed():
    L = Link()
    ev = L.send(request_frame(18, 5, 0, bytes(12)))
    ev += L.reply(response_frame(18, 0, 0, bytes(8)))
    ev += L.send(request_frame(1, 12, 1, fetch_request()))
    ev += L.reply(response_frame(1, 12, 1, fetch_response()))
    items, rep = run(ev)
    assert len(items) == 1 and "malformed_request" not in rep.warnings
    assert rep.warnings == {"unsupported_version": 1}
    assert rep.warning_examples["unsupported_version"][0] == (
        f"frame {ev[0].frame}: ApiVersions v5 request: a version fetchtool does not decode "
        "(request from 10.0.0.1:51000, counted only)")


def test_a_v3_fetch_row_has_no_isolation_level_rack_or_max_bytes_it_never_sent():
    L = Link()
    ev = L.send(request_frame(1, 3, 1, fetch_request()))
    ev += L.reply(response_frame(1, 3, 1, fetch_response()))
    ev += L.send(request_frame(1, 2, 2, fetch_request()))
    ev += L.reply(response_frame(1, 2, 2, fetch_response()))
    (v3, v2), _ = run(ev)
    assert (v3.max_bytes, v3.isolation_level, v3.rack_id) == (52428800, None, None)
    assert (v2.max_bytes, v2.isolation_level) == (None, None)
    assert (v3.session_id, v3.session_epoch) == (0, -1)  # design.md: as Kafka decodes them before v7


def test_responses_from_a_kafka_port_alone_are_not_taken_for_produce_requests():
    # a capture that lost the client's side: the broker's responses (small correlation ids read as Produce
    # headers: api key 0, version = the id) must not make port 9092 the client
    L = Link(client=Endpoint("10.0.0.1", 51000), broker=BROKER)
    ev = [L.gap(300, to_broker=True)]
    for corr in range(2, 5):
        ev += L.reply(response_frame(3, 1, corr, b"\x00\x00\x00\x00\x00\x00" + bytes(160)))
    ev.append(L.close())
    items, rep = run(ev)
    assert not any(k[0] == 0 for k in rep.requests)
