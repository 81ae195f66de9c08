"""Connections as scenarios: pairing, broker detection, resync, missing/orphan messages, non-Kafka traffic."""

import uuid

from kafka_wire import CLIENT, Link, fetch_request, fetch_response, request_frame, response_frame

from fetchtool.capture.events import Endpoint
from fetchtool.decoder import decode_events
from fetchtool.exchange import Exchange
from fetchtool.protocol import codec
from fetchtool.protocol.connection import OrphanResponse
from fetchtool.protocol.report import DecodeReport


def run(events, ports=None):
    rep = DecodeReport()
    return list(decode_events(events, "cap.pcap", ports, rep)), rep


def test_session_exchanges_pair_in_request_order_even_with_chunked_responses():
    L = Link()
    ev = L.send(request_frame(1, 12, 1, fetch_request(n=50)))
    ev += L.send(request_frame(3, 1, 2, bytes(4)))  # a Metadata v1 request in between, only counted
    ev += L.reply(response_frame(1, 12, 1, fetch_response(n=50, session_id=77)), chunk=97)
    ev += L.reply(response_frame(3, 1, 2, b"\x00" * 8))
    ev += L.send(request_frame(1, 12, 3, fetch_request(n=0, session_id=77, epoch=1)))
    ev += L.reply(response_frame(1, 12, 3, fetch_response(n=0, session_id=77)))
    items, rep = run(ev)
    assert [(x.correlation_id, x.session_id, x.session_epoch, x.response_session_id) for x in items] == [
        (1, 0, 0, 77), (3, 77, 1, 77)]
    first = items[0]
    assert first.partitions == 50 and first.response_partition_count == 50
    assert first.response_frame == ev[-4].frame  # the last response piece completed the response
    assert rep.requests[(3, 1)] == 1 and rep.other_apis == {(3, 1): 1}


def test_broker_on_nonstandard_port_is_detected_from_the_traffic():
    client, broker = Endpoint("192.168.1.5", 40000), Endpoint("192.168.1.9", 19092)
    L = Link(client=client, broker=broker)
    # the broker speaks first in the list of events? no: but the lower-numbered side is the client here
    ev = L.send(request_frame(1, 11, 42, fetch_request()))
    ev += L.reply(response_frame(1, 11, 42, fetch_response()))
    items, _ = run(ev)
    assert len(items) == 1 and items[0].broker == "192.168.1.9:19092" and items[0].client == "192.168.1.5:40000"


def test_client_port_lower_than_broker_port_still_detected():
    client, broker = Endpoint("10.1.1.1", 1234), Endpoint("10.1.1.2", 60000)
    L = Link(client=client, broker=broker)
    ev = L.reply(b"")[:0] + L.send(request_frame(1, 7, 5, fetch_request()))
    ev += L.reply(response_frame(1, 7, 5, fetch_response()))
    items, _ = run(ev)
    assert items[0].broker == "10.1.1.2:60000"


def test_v13_topic_ids_are_named_by_a_metadata_response():
    tid = str(uuid.uuid4())
    L = Link()
    ev = L.send(request_frame(3, 12, 1, bytes.fromhex("02") + bytes(16) + b"\x00" + b"\x00\x00" + b"\x00"))
    ev += L.reply(response_frame(3, 12, 1, codec.TopicNames({tid: "payments"})))
    ev += L.send(request_frame(1, 13, 2, fetch_request(n=2, topic_id=tid)))
    ev += L.reply(response_frame(1, 13, 2, fetch_response(n=2, topic_id=tid)))
    items, rep = run(ev)
    (x,) = items
    assert {p.topic for p in x.request_partitions} == {"payments"}
    assert {p.topic for p in x.response_partitions} == {"payments"}
    assert rep.topic_names == {tid: "payments"}


def test_client_software_from_an_api_versions_request_newer_than_kafka_knows():
    """franz-go v1.22.3 opens with ApiVersions v5 (KIP-1242 appends ClusterId and NodeId); Kafka 4.3.1 answers
    UNSUPPORTED_VERSION and the client asks again at v4. The software is read from the v5 request, no warning."""
    body = b"\x04kgo\x08v1.22.3" + b"\x00" + b"\xff\xff\xff\xff" + b"\x00"  # null ClusterId, NodeId -1, no tags
    L = Link()
    ev = L.send(request_frame(18, 5, 1, body))
    ev += L.reply(response_frame(18, 0, 1, b"\x00\x23\x00\x00\x00\x00"))  # v0: UNSUPPORTED_VERSION, no keys
    ev += L.send(request_frame(1, 12, 2, fetch_request()))
    ev += L.reply(response_frame(1, 12, 2, fetch_response()))
    items, rep = run(ev)
    assert items[0].client_software == "kgo/v1.22.3"
    assert not rep.warnings


def test_a_newer_api_versions_request_that_does_not_start_with_the_software_is_counted_only():
    """A layout fetchtool does not know (a name said to be 8 bytes long, 3 there): counted, not called damaged."""
    L = Link()
    ev = L.send(request_frame(18, 5, 1, b"\x09kgo"))
    ev += L.reply(response_frame(18, 0, 1, b"\x00\x23\x00\x00\x00\x00"))
    items, rep = run(ev)
    assert rep.warnings == {"unsupported_version": 1}


def test_client_software_from_api_versions():
    L = Link()
    ev = L.send(request_frame(18, 3, 1, codec.ClientSoftware("kafka-python", "3.0.12")))
    ev += L.reply(response_frame(18, 3, 1, b"\x00\x00\x00\x00\x00\x00\x00"))
    ev += L.send(request_frame(1, 12, 2, fetch_request()))
    ev += L.reply(response_frame(1, 12, 2, fetch_response()))
    items, rep = run(ev)
    assert items[0].client_software == "kafka-python/3.0.12"
    assert rep.client_software == {str(CLIENT): "kafka-python/3.0.12"}


def test_capture_starting_mid_flight_gives_an_orphan_then_exchanges():
    L = Link()
    ev = L.reply(response_frame(1, 12, 9, fetch_response()))  # its request was before the capture
    ev += L.send(request_frame(1, 12, 10, fetch_request()))
    ev += L.reply(response_frame(1, 12, 10, fetch_response()))
    items, rep = run(ev, ports=frozenset({9092}))
    assert isinstance(items[0], OrphanResponse) and items[0].correlation_id == 9
    assert isinstance(items[1], Exchange) and items[1].correlation_id == 10
    assert rep.orphan_responses == 1


def test_gap_in_the_response_direction_loses_one_response_and_resyncs():
    L = Link()
    reqs = [request_frame(1, 12, c, fetch_request(n=20)) for c in (1, 2, 3)]
    resps = [response_frame(1, 12, c, fetch_response(n=20, session_id=c)) for c in (1, 2, 3)]
    ev = []
    for r in reqs:
        ev += L.send(r)
    ev += L.reply(resps[0][:30])
    ev.append(L.gap(len(resps[0]) - 30 + 40))  # rest of response 1 and the start of response 2 lost
    ev += L.reply(resps[1][40:] + resps[2])
    items, rep = run(ev)
    assert [(x.correlation_id, x.response_session_id) for x in items] == [(1, None), (2, None), (3, 3)]
    assert rep.gaps == 1 and rep.responses_missing == 2


def test_gap_in_the_request_direction_resyncs_on_a_plausible_request():
    L = Link()
    r1, r2 = request_frame(1, 12, 1, fetch_request(n=30)), request_frame(1, 12, 2, fetch_request(n=3))
    ev = L.send(r1[:100])
    ev.append(L.gap(len(r1), to_broker=True))  # the rest of r1 and the start of garbage-looking bytes
    ev += L.send(b"\x00\x01\x02" * 7 + r2)
    ev += L.reply(response_frame(1, 12, 2, fetch_response(n=3)))
    items, rep = run(ev, ports=frozenset({9092}))
    assert [x.correlation_id for x in items] == [2]
    assert rep.skipped_bytes > 0


def test_tls_and_garbage_are_one_warning_each_and_never_raise():
    tls = Link(conn=1, broker=Endpoint("10.0.0.2", 9093))
    junk = Link(conn=2, client=Endpoint("10.0.0.3", 5555), broker=Endpoint("10.0.0.4", 80))
    ev = tls.send(b"\x16\x03\x01\x02\x00" + bytes(300)) + tls.reply(b"\x16\x03\x03" + bytes(90))
    ev += junk.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 3) + junk.reply(b"HTTP/1.1 200 OK\r\n\r\n")
    ev += [tls.close(), junk.close()]
    items, rep = run(ev)
    assert items == []
    assert rep.warnings["tls"] == 1 and rep.warnings["not_kafka"] == 1
    assert "frame 1" in rep.warning_examples["tls"][0]


def test_malformed_fetch_body_is_a_counted_warning_naming_the_frame():
    L = Link()
    good = request_frame(1, 12, 2, fetch_request())
    bad = request_frame(1, 12, 1, b"\x00\x00\x00")  # a Fetch v12 body cut short
    ev = L.send(bad) + L.send(good)
    ev += L.reply(response_frame(1, 12, 1, b"\xff")) + L.reply(response_frame(1, 12, 2, fetch_response()))
    items, rep = run(ev)
    assert [x.correlation_id for x in items] == [1, 2]
    assert items[0].request_partitions == () and items[0].response_partitions is None
    assert rep.warnings["malformed_request"] == 1 and rep.warnings["malformed_response"] == 1
    assert rep.warning_examples["malformed_request"][0].startswith("frame 1:")


def test_items_are_in_request_order_across_connections():
    a, b = Link(conn=1), Link(conn=2, client=Endpoint("10.0.0.7", 52000))
    ev = a.send(request_frame(1, 12, 1, fetch_request()))  # frame 1 on conn 1, answered late
    b.frame = a.frame
    ev += b.send(request_frame(1, 12, 1, fetch_request()))
    ev += b.reply(response_frame(1, 12, 1, fetch_response()))
    a.frame = b.frame
    ev += a.reply(response_frame(1, 12, 1, fetch_response()))
    items, _ = run(ev)
    assert [x.request_frame for x in items] == [1, 2]
