"""Where the next response frame starts, in bytes that began mid-message or after lost bytes; and where a
client's first request starts, when its direction began mid-message.

A response is `int32 size` + `int32 correlation id` + the rest, and a broker sends its responses back to back,
so a true frame start is followed by frames that chain: each size lands exactly on the next header, up to the
end of what has arrived. A candidate position is believed when

- its correlation id answers a request pending on the connection and the frames from it chain, or
- it is the very first byte of the stream (a capture that began between two messages, e.g. the response to a
  request sent before the capture) and the frames from it chain to the end of what has arrived, and no
  response to a pending request is found chaining inside what would be its first frame.

Record data is full of small integers that look like a size and a correlation id, so a candidate whose chain
breaks is rejected, and one whose chain is not complete yet makes the scan wait (the bytes are kept) until the
frame's end (and the header after it) has arrived. The search is bounded: a candidate frame longer than
WAIT_LIMIT is not waited for (a pending correlation id decides it alone), and only the oldest PENDING_LOOKED_AT
pending correlation ids are searched for (a broker answers in request order, so the oldest comes first).
Cost per flow: O(bytes x looked-at ids) per scan, at most WAIT_LIMIT bytes held per candidate, and a candidate
at the stream's first byte rescanned with every packet only while less than RESCAN_EVERY_PACKET is held (then
after every quarter more). Known limit: a stream that ends while such a candidate (over RESCAN_EVERY_PACKET
long) still waits keeps its last quarter unscanned.
"""

from __future__ import annotations

import re
from struct import Struct

from .framing import MAX_FRAME
from .headers import APIS, CONTROLLED_SHUTDOWN, MAX_CLIENT_ID, VERSION_SLACK, plausible_request_start

WAIT_LIMIT = 8 * 1024 * 1024
PENDING_LOOKED_AT = 64
RESCAN_EVERY_PACKET = 1024 * 1024
LOOK_PAST = 16 * 1024  # how far past a waiting first-request candidate a better one is looked for
_I32 = Struct(">i")
_I16 = Struct(">h")
_EXACT, _BROKEN, _SHORT = range(3)


def _header_bytes() -> re.Pattern[bytes]:
    """Positions whose bytes could begin a plausible request at all (plausible_request_start says False
    everywhere else): a size from 8 to MAX_FRAME, a known api key and a version below 256, and a client id
    length from -1 to MAX_CLIENT_ID (ControlledShutdown v0 has none). Found by the regex engine, so a scan
    judges a handful of candidates in Python instead of every byte (a Fetch request's partition entries, runs of
    zero bytes and small numbers, would give a candidate every few bytes without the size's lower bound and
    the client id's length)."""
    top_size = MAX_FRAME >> 24
    top_key = max(APIS)
    top_version = max(v for _name, v, _flex in APIS.values()) + VERSION_SLACK
    top_id = MAX_CLIENT_ID >> 8
    assert 0 < top_size < 0x80 and top_key < 0x80 and top_version < 0x80 and 0 < top_id < 0x80, \
        "the byte ranges below are too narrow"
    size = (b"(?:[\\x01-%s][\\s\\S]{3}|\\x00[\\x01-\\xff][\\s\\S]{2}|\\x00\\x00[\\x01-\\xff][\\s\\S]"
            b"|\\x00\\x00\\x00[\\x08-\\xff])" % re.escape(bytes([top_size])))
    client_id = b"(?:[\\x00-%s][\\s\\S]|\\xff\\xff)" % re.escape(bytes([top_id]))  # -1, or up to top_id * 256 + 255
    v0 = re.escape(_I16.pack(CONTROLLED_SHUTDOWN) + _I16.pack(0))
    return re.compile(b"(?=%s(?:\\x00[\\x00-%s]\\x00[\\x00-%s][\\s\\S]{4}%s|%s))"
                      % (size, re.escape(bytes([top_key])), re.escape(bytes([top_version])), client_id, v0))


_CANDIDATES = _header_bytes()


def scan_responses(raw: bytes, start: int, pending: dict[int, int], stream_start: bool):
    """Scanner for framing.Framer: (frame start, same) when one is believed; (None, keep) when none is in
    sight; (None, candidate, need) when a candidate waits for `need` bytes from it."""
    end = len(raw)
    is_pending = pending.__contains__
    first_wait = None  # the stream's first byte, waiting for its frame's end without a pending id behind it
    if stream_start and start == 0:
        verdict = _judge(raw, 0, end, is_pending, on_id=False)
        if verdict is not None:
            if verdict[0] is not None or end < 8 or is_pending(_I32.unpack_from(raw, 4)[0]):
                return verdict
            # A response to a pending request whose frames chain beats it: the capture began inside a message.
            # Requests arrive meanwhile, so it is looked at again before its end: with every packet while less
            # than RESCAN_EVERY_PACKET is held, then after every quarter more bytes (a bounded number of rescans).
            first_wait = None, 0, (0 if end < RESCAN_EVERY_PACKET else min(verdict[2], end + end // 4))
    # Indexed only now: a stream whose first byte starts a response that chains (the common case) needs none.
    ids = [_I32.pack(c) for c in list(pending)[:PENDING_LOOKED_AT]]
    nxt = {k: raw.find(k, start + 4) for k in ids}
    while True:
        live = [i for i in nxt.values() if i != -1]
        if not live:
            return first_wait or (None, max(start, end - 7))
        i = min(live)
        verdict = _judge(raw, i - 4, end, is_pending, on_id=True)
        if verdict is not None:
            if verdict[0] is not None or first_wait is None:
                return verdict
            return first_wait
        for k, at in nxt.items():
            if at == i:
                nxt[k] = raw.find(k, i + 1)


def scan_first_request(raw: bytes, start: int):
    """Scanner for a client's first request, in bytes that may begin inside one: a plausible request header
    (size, known api key and version, client id) whose requests chain exactly to the end of what has arrived.
    One plausible header is not enough: Produce record data holds byte runs that read as one. A candidate
    whose chain runs past the end waits for it, unless within LOOK_PAST bytes after it requests chain exactly
    to the end: then it was record data (it is looked at again with every packet meanwhile, so the request
    after a cut one is framed with its own packet, before its response arrives)."""
    return FirstRequestScan()(raw, start)


class FirstRequestScan:
    """scan_first_request for one direction, remembering between calls which positions could start a request
    at all. While a candidate waits, the framer calls again with every packet, with the same bytes and more
    after them: a position's plausibility depends only on its own 14 bytes, and a chain that broke stays broken
    (more bytes after it change none of the links before the break), so only the chains from plausible
    positions that have not broken are followed again, and only the new bytes are searched. A chain short of
    the end is the same short chain until the bytes reach the end it needs (a Fetch request's partition entries
    hold thousands of positions that read as a long frame's header): it is followed again only then. Any other
    call (other bytes, another start) is a fresh scan. Same answers as scan_first_request, call for call."""

    __slots__ = ("_start", "_head", "_plausible", "_until", "_judged")

    def __init__(self) -> None:
        self._start = -1
        self._head = b""  # the bytes the remembered judgements were made on
        self._plausible: list[int] = []  # plausible positions in [start, judged), in order
        self._until: list[int] = []  # for each, the end before which its chain is still the same short one
        self._judged = 0

    def __call__(self, raw: bytes, start: int):
        end = len(raw)
        if (start == 0 and self._start == -1 and plausible_request_start(raw, 0, MAX_FRAME)
                and _request_chain(raw, 0, end)[0] == _EXACT):
            # Nothing remembered and the stream's first byte starts requests that chain to its end (a connection
            # seen from its start): the scan below would judge position 0 first and find just that.
            return 0, 0
        last = end - 14  # from here on plausible_request_start cannot tell yet
        if start == self._start and self._head and raw.startswith(self._head):
            plausible, until, judged = self._plausible, self._until, self._judged
        else:
            plausible, until, judged = [], [], start
        waiting: tuple[None, int, int] | None = None
        found: tuple[int, int] | tuple[None, int, int] | None = None
        broke = False
        for i, p in enumerate(plausible):
            if waiting is not None and p > waiting[1] + LOOK_PAST:
                found = waiting
                break
            if end < until[i]:
                kind, need = _SHORT, until[i] - p
            else:
                kind, _links, need = _request_chain(raw, p, end)
                until[i] = p + need
            if kind == _EXACT:
                found = p, p
                break
            if kind == _SHORT and waiting is None and need <= WAIT_LIMIT:
                waiting = None, p, 0
            elif kind == _BROKEN:
                plausible[i] = -1
                broke = True
        if broke:
            until = [u for p, u in zip(plausible, until) if p >= 0]
            plausible = [p for p in plausible if p >= 0]
        if found is None:
            for m in _CANDIDATES.finditer(raw, judged):
                p = m.start()
                if p > last:
                    break
                if waiting is not None and p > waiting[1] + LOOK_PAST:
                    found = waiting
                    break
                judged = p + 1
                if not plausible_request_start(raw, p, MAX_FRAME):
                    continue
                kind, _links, need = _request_chain(raw, p, end)
                if kind == _EXACT:
                    found = p, p
                    break
                if kind != _BROKEN:
                    plausible.append(p)
                    until.append(p + need)
                    if kind == _SHORT and waiting is None and need <= WAIT_LIMIT:
                        waiting = None, p, 0
            if found is None:
                judged = max(judged, last + 1)  # every position up to `last` was searched
        if found is not None and found[0] is not None:
            self._start, self._plausible, self._until, self._judged, self._head = -1, [], [], 0, b""  # forget
            return found  # framing starts
        self._start, self._plausible, self._until, self._judged = start, plausible, until, judged
        # every byte the remembered chains were followed over: a call with other bytes there is a fresh scan
        self._head = raw[:end] if judged > start else b""
        if found is not None:
            return found
        # Every position before max(start, last + 1) was judged; the first one not judged needs more bytes.
        return waiting or (None, min(end, max(start, last + 1)))


def _request_chain(raw: bytes, p: int, end: int) -> tuple[int, int, int]:
    """Follow plausible requests from p: (_EXACT, requests, 0) when they end exactly at `end`; (_SHORT,
    requests, need) when `need` bytes from p are needed to see the next; (_BROKEN, requests, 0) otherwise."""
    q, links = p, 0
    while True:
        q += 4 + _I32.unpack_from(raw, q)[0]
        links += 1
        if q == end:
            return _EXACT, links, 0
        if q > end or end - q < 14:
            return _SHORT, links, (q - p if q > end else q + 14 - p)
        if not plausible_request_start(raw, q, MAX_FRAME):
            return _BROKEN, links, 0


def answered_ids(raw: bytes, ids) -> int:
    """How many of `ids` `raw` (one direction's first bytes) answers with a response whose frames do not
    break? For telling the broker side from the client side: a candidate still short of its end counts."""
    n = 0
    for c in ids:
        k = _I32.pack(c)
        i = raw.find(k, 4)
        while i != -1 and _chain(raw, i - 4, len(raw))[0] == _BROKEN:
            i = raw.find(k, i + 1)
        n += i != -1
    return n


def _judge(raw: bytes, p: int, end: int, is_pending, on_id: bool):
    """A verdict on the candidate at p: a scanner result, or None to look further."""
    if end - p < 8:
        return None, p, 8
    if not on_id and is_pending(_I32.unpack_from(raw, p + 4)[0]):
        on_id = True  # the stream's first bytes answer a pending request: as good as any candidate
    kind, need = _chain(raw, p, end)
    if kind == _EXACT:
        return p, p
    if kind == _SHORT:
        if need <= WAIT_LIMIT:
            return None, p, need
        if on_id:
            return p, p  # too long to wait for: the pending correlation id is the evidence
    return None


def _chain(raw: bytes, p: int, end: int) -> tuple[int, int]:
    """Follow frames from p: (_EXACT, 0) when they end exactly at `end`; (_BROKEN, 0) when a header is not a
    response header; (_SHORT, need) when `need` bytes from p are needed to see the next frame end or header."""
    q = p
    while True:
        if end - q < 8:
            return _SHORT, q + 8 - p
        size = _I32.unpack_from(raw, q)[0]
        if not 4 <= size <= MAX_FRAME or _I32.unpack_from(raw, q + 4)[0] < 0:
            return _BROKEN, 0
        q += 4 + size
        if q == end:
            return _EXACT, 0
        if q > end:
            return _SHORT, q - p
