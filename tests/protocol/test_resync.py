"""Where a response frame starts after a capture began mid-message: protocol/resync.py's rules and bounds, on
bytes laid out as a broker sends them (size, correlation id, body) behind bytes that only look like a header."""

from __future__ import annotations

from struct import pack

from fetchtool.protocol.resync import WAIT_LIMIT, scan_first_request, scan_responses


def response(corr: int, body: bytes = b"\0" * 20) -> bytes:
    return pack(">ii", 4 + len(body), corr) + body


def test_a_pending_correlation_id_whose_frames_do_not_chain_is_record_data():
    # Record bytes that read as (size 16, correlation id 7), followed by bytes that are no header, then the real
    # response to request 7 and the next one.
    fake = pack(">ii", 16, 7) + b"\x01" * 12 + b"\xff" * 9
    raw = fake + response(7) + response(8)
    assert scan_responses(raw, 0, {7: 1, 8: 1}, stream_start=True) == (len(fake), len(fake))


def test_the_first_byte_of_a_stream_starts_a_frame_when_its_frames_chain_to_the_end():
    # The response to a request sent before the capture began: no pending id, but it chains exactly.
    raw = response(3) + response(4)
    assert scan_responses(raw, 0, {}, stream_start=True) == (0, 0)
    # Further into the stream the same bytes need a pending correlation id.
    assert scan_responses(b"\x05" + raw, 1, {}, stream_start=False)[0] is None


def test_a_candidate_not_yet_complete_waits_for_its_end_and_no_longer_than_the_wait_limit():
    head = pack(">ii", 1000, 9) + b"\0" * 100  # a response to pending request 9, 100 of its 1,000 bytes here
    assert scan_responses(head, 0, {9: 1}, stream_start=False) == (None, 0, 1004)
    # Longer than WAIT_LIMIT: not waited for; the pending correlation id alone decides.
    huge = pack(">ii", WAIT_LIMIT + 4, 9) + b"\0" * 100
    assert scan_responses(huge, 0, {9: 1}, stream_start=False) == (0, 0)
    # And at the stream's first byte, without a pending id, such a size is not believed at all.
    assert scan_responses(pack(">ii", WAIT_LIMIT + 4, 3) + b"\0" * 100, 0, {}, stream_start=True)[0] is None


def test_a_first_request_is_where_requests_chain_to_the_end_not_the_first_plausible_header():
    # A Fetch v12 request header (api key 1, version 12, correlation id 5, client id "c") after the tail of a
    # cut request; a header-like run inside that tail claims 4,000 bytes and would swallow it.
    fetch = pack(">ihhih", 24, 1, 12, 5, 1) + b"c" + b"\0" * 13
    tail = b"\x07" * 3 + pack(">ihhih", 4000, 0, 9, 77, 1) + b"c" + b"\x07" * 5
    assert scan_first_request(tail + fetch, 0) == (len(tail), len(tail))
