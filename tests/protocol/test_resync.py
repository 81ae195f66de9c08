"""Where a response frame starts after a capture began mid-message: protocol/resync.py's rules and bounds, on
bytes laid out as a broker sends them (size, correlation id, body) behind bytes that only look like a header."""

from __future__ import annotations

from struct import pack

from fetchtool.protocol.resync import WAIT_LIMIT, FirstRequestScan, scan_first_request, scan_responses


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


# -- the first-request scan, as the framer calls it packet after packet --------------------------------------
def reference_first_request(raw: bytes, start: int):
    """The rule as resync.py's docstring states it, judged at every byte: the oracle for the fast scan (which
    judges only the positions a regex finds, and remembers its judgements between packets)."""
    from fetchtool.protocol.framing import MAX_FRAME
    from fetchtool.protocol.headers import plausible_request_start
    from fetchtool.protocol.resync import _EXACT, _SHORT, LOOK_PAST, _request_chain

    end = len(raw)
    waiting = None
    for p in range(start, end):
        if waiting is not None and p > waiting[1] + LOOK_PAST:
            break
        ok = plausible_request_start(raw, p, MAX_FRAME)
        if ok is None:
            return waiting or (None, p)
        if not ok:
            continue
        kind, _links, need = _request_chain(raw, p, end)
        if kind == _EXACT:
            return p, p
        if kind == _SHORT and waiting is None and need <= WAIT_LIMIT:
            waiting = None, p, 0
    return waiting or (None, end)


def _request(corr: int, body: bytes, api_key: int = 1, version: int = 12, client: bytes = b"consumer-1") -> bytes:
    head = pack(">hhih", api_key, version, corr, len(client)) + client + b"\0"
    return pack(">i", len(head) + len(body)) + head + body


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

# Bodies full of the small integers fetch requests are made of (partition ids, epochs, offsets), which read
# as plausible headers all over the place.
_body = st.lists(st.sampled_from([0, 0, 0, 1, 2, 5, 12, 0x10, 0x5C, 0xFF]), max_size=1500).map(bytes)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_body, st.sampled_from([0, 1, 3, 18])), min_size=1, max_size=4), st.data())
def test_the_first_request_scan_answers_as_the_rule_at_every_packet(requests, data):
    raw = b"".join(_request(i, body, key) for i, (body, key) in enumerate(requests))
    raw = raw[data.draw(st.integers(0, len(raw) - 1)):]  # the capture began inside the stream
    scan = FirstRequestScan()  # one per direction: it remembers between the framer's calls
    pos = 0
    while pos < len(raw):
        pos = min(len(raw), pos + data.draw(st.sampled_from([1, 13, 200, 1448])))
        start = data.draw(st.sampled_from([0, 0, 0, pos // 2]))
        assert scan(raw[:pos], start) == reference_first_request(raw[:pos], start) == \
            scan_first_request(raw[:pos], start)


def test_a_waiting_first_request_is_framed_with_the_packet_that_completes_it():
    # A 5,000-byte request cut by the capture's start, then a whole one arriving in 1,448-byte packets: the
    # scan waits on the whole one's header and answers as soon as its last byte is in.
    whole = _request(8, bytes(5000))
    cut = _request(7, bytes(300))[50:]
    raw = cut + whole
    scan = FirstRequestScan()
    answers = [scan(raw[:n], 0) for n in range(1448, len(raw), 1448)] + [scan(raw, 0)]
    assert answers[-1] == (len(cut), len(cut))
    assert answers[0] == (None, len(cut), 0)  # the whole one's header seen, its end not yet
    assert all(a == reference_first_request(raw[:n], 0) for a, n in zip(answers, range(1448, len(raw), 1448)))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from([0, 0, 1, 7, 8, 0x10, 0x11, 0xFF]), st.integers(0, 255)), max_size=400)
       .map(bytes))
def test_the_candidate_search_misses_no_plausible_request_header(raw):
    # The regex that picks the positions the scan judges must find every position plausible_request_start
    # accepts (sizes of 8 and more, client id lengths -1 to MAX_CLIENT_ID, ControlledShutdown v0 without one).
    from fetchtool.protocol.framing import MAX_FRAME
    from fetchtool.protocol.headers import plausible_request_start
    from fetchtool.protocol.resync import _CANDIDATES

    found = {m.start() for m in _CANDIDATES.finditer(raw)}
    plausible = {p for p in range(len(raw)) if plausible_request_start(raw, p, MAX_FRAME)}
    assert plausible <= found


def test_the_candidate_search_finds_the_edges_of_what_is_plausible():
    from fetchtool.protocol.framing import MAX_FRAME
    from fetchtool.protocol.headers import MAX_CLIENT_ID
    from fetchtool.protocol.resync import _CANDIDATES

    for size, key, version, id_len in ((8, 7, 0, 0x7777), (10, 1, 12, -1), (MAX_FRAME, 1, 12, MAX_CLIENT_ID),
                                       (10 + MAX_CLIENT_ID, 92, 3, MAX_CLIENT_ID), (8, 0, 0, 0)):
        raw = pack(">ihhih", size, key, version, 1, id_len)
        assert _CANDIDATES.match(raw), (size, key, version, id_len)
