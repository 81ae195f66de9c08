"""One TCP connection seen as Kafka: which side is the broker, framing per direction, pairing by correlation
id, and Exchange rows for Fetch / FetchSnapshot.

Sans-IO: feed it the capture layer's stream events, get Exchange / OrphanResponse objects back. State shared
across connections (topic names per broker, counters) lives in a DecodeContext the decoder owns.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from struct import Struct
from typing import Callable, Iterator, Sequence

from .._fast import fast_constructor
from ..capture.events import Endpoint, StreamData, StreamGap, StreamRun
from ..exchange import Exchange
from . import codec
from .framing import MAX_FRAME, Frame, Framer
from .headers import (
    API_VERSIONS, FETCH, FETCH_SNAPSHOT, METADATA, HeaderError, parse_request_header,
    plausible_request_start, response_body_offset,
)
from .report import DecodeReport, MidMessageStart
from .resync import FirstRequestScan, answered_ids, scan_first_request, scan_responses

WELL_KNOWN_PORTS = frozenset({9092, 9093, 9094, 9095, 9096, 9097, 9192, 19092, 29092, 39092})
DETECT_LIMIT = 256 * 1024  # bytes buffered per direction before the broker side must be decided
DEEP_SCAN = 64 * 1024  # how far into a direction detection looks for a first request past a cut one
_I32 = Struct(">i")
_new_exchange = fast_constructor(Exchange)  # one per exchange (fetchtool._fast)
_SESSION_APIS = (FETCH, FETCH_SNAPSHOT)
_NOTHING: tuple[()] = ()  # what most events yield: shared, not a new empty list each time
# How far a resync accepts a request's correlation id beyond the connection's last one. Java clients draw ids
# from one counter for all their connections, so ids on one connection jump by the requests sent elsewhere.
CORRELATION_WINDOW = 1 << 20


@dataclass(frozen=True, slots=True)
class OrphanResponse:
    """A response whose request was not captured (e.g. the capture started mid-flight): REQUEST_MISSING."""

    conn: int
    frame: int
    ts: float
    client: str
    broker: str
    correlation_id: int
    file: str = ""  # added beside the brief's fields: findings name the capture file


Found = Exchange | OrphanResponse  # what a connection yields


@dataclass
class DecodeContext:
    file: str
    report: DecodeReport
    ports: frozenset[int] | None = None
    topic_names: dict[str, dict[str, str]] = field(default_factory=dict)  # broker "ip:port" -> id -> name
    on_fetch_request: Callable[[tuple[int, int, int]], None] | None = None  # (frame, conn, corr) now pending
    # False: the exchanges' partition tuples may be stand-ins good only for counting (decoder.DecodeRun.rows)
    rows: codec.Rows = True


@dataclass(slots=True)
class _Pending:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    frame: int
    ts: float
    size: int
    body: codec.FetchRequestBody | None  # None when not decoded


class KafkaConnection:
    def __init__(self, conn: int, ctx: DecodeContext):
        self.conn = conn
        self.ctx = ctx
        self.state = "detect"  # detect -> kafka | ignored
        self.client: Endpoint | None = None
        self.broker: Endpoint | None = None
        self._client_s = self._broker_s = ""
        self._held: list[StreamData | StreamGap] = []  # events seen while detecting
        self._prefix: dict[Endpoint, bytearray] = {}
        self._pending: deque[_Pending] = deque()
        self._pending_ids: dict[int, int] = {}  # correlation id -> pending count
        self._software: str | None = None
        self._req: Framer | None = None
        self._resp: Framer | None = None
        # What this client's requests look like, for a resync to tell its next request from noise.
        self._last_corr: int | None = None
        self._client_key: bytes | None = None  # client id as its header carries it (int16 length + bytes)
        self._first_scan = FirstRequestScan()  # while the first request is looked for, packet after packet

    # -- events in ----------------------------------------------------------------------------------------
    def feed(self, ev: StreamData | StreamGap) -> Sequence[Found]:
        state = self.state
        if state == "kafka":
            return self._dispatch(ev)
        if state == "ignored":
            return []
        self._held.append(ev)  # still detecting which side is the broker
        if not isinstance(ev, StreamGap):
            p = self._prefix.setdefault(ev.src, bytearray())
            if len(p) < DETECT_LIMIT:
                p += ev.data[: DETECT_LIMIT - len(p)]
        if not self._detect(final=False):
            return []
        return self._replay()

    def feed_within_frames(self, run: StreamRun, i: int) -> int:
        """Pieces i, i+1, ... of a run that only fill the frame their direction is framing (Framer.
        feed_within_frame): taken at once, as feeding them one by one would take them, yielding nothing.
        Returns the index of the first piece not taken (i when none is): the caller feeds that one as an event."""
        if self.state != "kafka":
            return i
        src = run.src
        to_broker = src is self.client or (src is not self.broker and src == self.client)
        framer = self._req if to_broker else self._resp
        assert framer is not None, "framing a connection not decided as Kafka"  # _decide() set both framers
        return framer.feed_within_frame(run.pieces, run.ends, run.frames, run.tss, i)

    @property
    def holding_since(self) -> int | None:
        """Frame of the first event held back while the broker side is undecided (None: nothing held)."""
        return self._held[0].frame if (self.state == "detect" and self._held) else None

    def close(self) -> Sequence[Found]:
        """End of the connection: decide if still undecided, then flush requests that got no response."""
        out: list[Found] = []
        if self.state == "detect":
            if self._detect(final=True):
                out = self._replay()
            else:
                return []
        if self.state != "kafka":
            return out
        while self._pending:
            out.extend(self._missing(self._pending.popleft()))
        self._pending_ids.clear()
        req, resp = self._framers()
        for f in (req, resp):
            f.end()
            if f.mid_start is not None:
                self._report_mid_start(f, f is req)
        self._report_damage()
        self._count_framer_skips()
        self._req = self._resp = None  # the framers hold our bound scanners: dropped, the closed connection is freed
        return out                     # by its reference count, not left to the cycle collector

    # -- broker detection ---------------------------------------------------------------------------------
    def _detect(self, final: bool) -> bool:
        ev0 = self._held[0]
        a, b = ev0.src, ev0.dst
        ports = self.ctx.ports
        if ports is not None:
            a_b, b_b = a.port in ports, b.port in ports
            if a_b != b_b:
                return self._decide(client=b if a_b else a, broker=a if a_b else b)
            if not (a_b or b_b):
                self.state = "ignored"  # the user named the Kafka ports; this is not one of them
                return False
        for p in self._prefix.values():
            if len(p) >= 2 and p[0] == 0x16 and p[1] == 0x03:
                return self._not_kafka(f"TLS traffic between {a} and {b} (encrypted Kafka cannot be decoded)")
        full = any(len(p) >= DETECT_LIMIT for p in self._prefix.values()) or len(self._held) > 256
        if not (final or full) and sum(1 for p in self._prefix.values() if p) < 2:
            return False  # one side's bytes alone: nothing answers its requests yet, so nothing decides
        # Requests are looked for past a cut first message only when deciding at last: that scan costs a pass
        # over the first DEEP_SCAN bytes, not to be repeated with every event held.
        req_ids, client = self._by_answers(a, b, deep=False)
        if client is None and (final or full):
            req_ids, client = self._by_answers(a, b, deep=True)
        if client is not None:
            return self._decide(client=client, broker=b if client == a else a)
        if not (final or full):
            return False
        if len(req_ids) == 1:
            (ep,) = req_ids
            other = b if ep == a else a
            if ep.port in WELL_KNOWN_PORTS and other.port not in WELL_KNOWN_PORTS:
                # Only one direction was seen, from a Kafka port: responses whose small correlation id reads as
                # a Produce header (api key 0, version = the id), not requests from a client on port 9092.
                return self._decide(client=other, broker=ep)
            return self._decide(client=ep, broker=other)
        if len(req_ids) == 2:
            broker = a if a.port in WELL_KNOWN_PORTS else b if b.port in WELL_KNOWN_PORTS else min(
                (a, b), key=lambda e: e.port)
            return self._decide(client=b if broker == a else a, broker=broker)
        if not any(self._prefix.values()):
            self.state = "ignored"  # nothing but gaps or no payload: nothing to say
            return False
        return self._not_kafka(f"non-Kafka traffic between {a} and {b} (no plausible request header)")

    def _by_answers(self, a: Endpoint, b: Endpoint, deep: bool):
        """(each side's request correlation ids, the client side if the answers tell it, else None). The side
        whose requests the other answers is the client. Both can look answered when one side's first bytes were
        cut mid-message (a response read as a request, by accident): the side more of whose requests are
        answered wins, and a tie waits for more traffic."""
        req_ids: dict[Endpoint, set[int]] = {}
        for ep in (a, b):
            ids = _request_ids(self._prefix.get(ep, b""), deep)
            if ids:
                req_ids[ep] = ids
        answered = {ep: _answered(self._prefix.get(b if ep == a else a, b""), ids) for ep, ids in req_ids.items()}
        best = max(answered.values(), default=0)
        winners = [ep for ep, n in answered.items() if n == best]
        return req_ids, (winners[0] if best and len(winners) == 1 else None)

    def _decide(self, client: Endpoint, broker: Endpoint) -> bool:
        self.state = "kafka"
        self.client, self.broker = client, broker
        self._client_s, self._broker_s = str(client), str(broker)
        self.ctx.report.kafka_connections += 1
        self._req = Framer(self._scan_requests, synced=False, min_size=8)
        # Unsynced too: a connection seen without its SYN may begin inside a response (resync.py decides).
        self._resp = Framer(self._scan_responses, synced=False, min_size=4)
        return True

    def _not_kafka(self, message: str) -> bool:
        self.state = "ignored"
        frame = self._held[0].frame if self._held else 0
        code = "tls" if message.startswith("TLS") else "not_kafka"
        self.ctx.report.warn(code, f"frame {frame}: {message}; connection ignored")
        self._held.clear()
        self._prefix.clear()
        return False

    def _replay(self) -> list[Found]:
        held, self._held = self._held, []
        self._prefix.clear()
        out: list[Found] = []
        for ev in held:
            if self.state != "kafka":
                break
            out.extend(self._dispatch(ev))
        return out

    # -- framing and pairing ------------------------------------------------------------------------------
    def _framers(self) -> tuple[Framer, Framer]:
        """(request, response) framers: _decide() sets both, and only a connection decided as Kafka frames."""
        req, resp = self._req, self._resp
        assert req is not None and resp is not None, "framing a connection not decided as Kafka"
        return req, resp

    def _dispatch(self, ev: StreamData | StreamGap) -> Sequence[Found]:
        src = ev.src
        # The capture layer reuses Endpoint objects: identity settles almost every event without __eq__.
        to_broker = src is self.client or (src is not self.broker and src == self.client)
        framer = self._req if to_broker else self._resp
        assert framer is not None, "framing a connection not decided as Kafka"  # _decide() set both framers
        if isinstance(ev, StreamGap):
            framer.gap(ev.lost_bytes)
            return []
        frames = framer.feed(ev.data, ev.frame, ev.ts)
        out: Sequence[Found] = _NOTHING
        if to_broker:
            if not frames and framer.resyncing and framer.frames == 0 and framer.skipped_bytes > DETECT_LIMIT:
                self._not_kafka(f"no Kafka request found in the first {framer.skipped_bytes:,} bytes from {self.client}")
                return []
            for fr in frames:
                self._on_request(fr)
        elif frames:
            out = [found for fr in frames for found in self._on_response(fr)]
        if framer.damage:
            self._report_damage()
        if framer.mid_start is not None:
            self._report_mid_start(framer, to_broker)
        return out

    def _report_mid_start(self, framer: Framer, to_broker: bool) -> None:
        """One capture_started_mid_message warning per direction whose first bytes were inside a message."""
        m, framer.mid_start = framer.mid_start, None
        if m is None:
            return
        side = f"request from {self._client_s}" if to_broker else f"response from {self._broker_s}"
        where = (f"framing resumed at frame {m.resumed_frame}" if m.resumed_frame is not None
                 else "no frame start found before the stream ended")
        rep = self.ctx.report
        rep.warn("capture_started_mid_message", f"frame {m.frame}: capture started mid-message: {side}; {where} "
                 f"({m.skipped:,} bytes skipped)")
        rep.mid_message_starts.append(MidMessageStart(
            self.ctx.file, self.conn, self._client_s, self._broker_s, "request" if to_broker else "response",
            m.frame, m.resumed_frame, m.skipped))

    def _report_damage(self) -> None:
        """One bad_frame_size warning per resync after a size prefix that could not be believed."""
        req, resp = self._framers()
        if not (req.damage or resp.damage):
            return  # (every closed connection asks)
        for f, side in ((req, f"request from {self._client_s}"), (resp, f"response from {self._broker_s}")):
            for d in f.damage:
                where = (f"framing resumed at frame {d.resumed_frame}" if d.resumed_frame is not None
                         else "no frame start found before the stream ended")
                self.ctx.report.warn("bad_frame_size", f"frame {d.frame}: {side} has size prefix {d.size:,}, "
                                     f"which the stream does not bear out; {where} ({d.skipped:,} bytes skipped)")
            f.damage.clear()

    def _scan_requests(self, buf: memoryview, start: int) -> tuple[int | None, int] | tuple[None, int, int]:
        """Next position where this client's next request could start. Once the connection has shown a request,
        a candidate must also carry its client id and a correlation id just after its last one, so the bytes
        of a damaged request's body are not taken for phantom requests."""
        if self._client_key is None:
            return self._first_scan(buf.obj if isinstance(buf.obj, bytes) else bytes(buf), start)
        raw = buf.obj if isinstance(buf.obj, bytes) else bytes(buf)
        p = next(self._next_requests(raw, start), None)
        if p is not None:
            return p, p
        return None, max(start, len(raw) - 11 - len(self._client_key))

    def _next_requests(self, raw: bytes, start: int) -> Iterator[int]:
        """Every position from `start` on where this client's next request starts, by its client id (which
        follows size, api key, version and correlation id) and correlation id."""
        key, last = self._client_key, self._last_corr
        if key is None or last is None:  # no request with a client id seen yet: nothing to recognise it by
            return
        i = raw.find(key, start + 12)
        while i != -1:
            if _next_request_at(raw, i - 12, key, last):
                yield i - 12
            i = raw.find(key, i + 1)

    def _recover_request(self, corr: int) -> bool:
        """A response to `corr` arrived, which no framed request asked for. If the request framer is still
        filling a frame that holds that request (its own header or one inside it), the frame's size prefix is
        wrong: the broker answered, so the frame ended before the next request of this client (or with the
        bytes buffered). Frame it there and take what follows; True if `corr` is now pending."""
        req = self._req
        if self._client_key is None or req is None or not req.pending_frame() or req.buffered < 12:
            return False
        raw = req.peek()
        starts = list(self._next_requests(raw, 1))  # past the pending frame's own client id
        if _I32.unpack_from(raw, 8)[0] != corr and not any(_I32.unpack_from(raw, q + 8)[0] == corr for q in starts):
            return False
        for fr in req.resize_pending((starts[0] if starts else len(raw)) - 4):
            self._on_request(fr)
        self._report_damage()
        return corr in self._pending_ids

    def _scan_responses(self, buf: memoryview, start: int):
        """Next position where a response frame starts (resync.py): one answering a pending request, or the
        stream's first byte when the frames from there chain."""
        raw = buf.obj if isinstance(buf.obj, bytes) else bytes(buf)
        return scan_responses(raw, start, self._pending_ids, self._framers()[1].at_stream_start)

    def _on_request(self, fr: Frame) -> None:
        rep = self.ctx.report
        try:
            h = parse_request_header(fr.payload)
        except HeaderError as exc:
            rep.warn("malformed_request", f"frame {fr.frame}: malformed request header from {self._client_s}: {exc}")
            return
        rep.requests[(h.api_key, h.api_version)] += 1
        self._last_corr = h.correlation_id
        if h.body_offset >= 10:  # a header that carries a client id
            self._client_key = _client_key(fr.payload)
        body = None
        if h.api_key in _SESSION_APIS or (h.api_key == API_VERSIONS and h.api_version >= 3):
            try:
                body = codec.decode_request(h.api_key, h.api_version, fr.payload[h.body_offset:], self._names(),
                                            self.ctx.rows)
            except codec.UnsupportedApi as exc:
                rep.warn("unsupported_version", f"frame {fr.frame}: {exc} (request from {self._client_s}, counted only)")
            except codec.CodecError as exc:
                rep.warn("malformed_request", f"frame {fr.frame}: {exc}")
            if isinstance(body, codec.ClientSoftware):
                self._software = str(body)
                rep.client_software[self._client_s] = self._software
                rep.software_client_ids[self._client_s] = h.client_id
                body = None
        p = _Pending(h.api_key, h.api_version, h.correlation_id, h.client_id, fr.frame, fr.ts, fr.size, body)
        self._pending.append(p)
        self._pending_ids[h.correlation_id] = self._pending_ids.get(h.correlation_id, 0) + 1
        if h.api_key in _SESSION_APIS and self.ctx.on_fetch_request is not None:
            self.ctx.on_fetch_request((fr.frame, self.conn, h.correlation_id))

    def _on_response(self, fr: Frame) -> list[Found]:
        rep = self.ctx.report
        payload = fr.payload
        corr = _I32.unpack_from(payload, 0)[0]
        if corr not in self._pending_ids and not self._recover_request(corr):
            rep.orphan_responses += 1
            return [OrphanResponse(self.conn, fr.frame, fr.ts, self._client_s, self._broker_s, corr, self.ctx.file)]
        out: list[Found] = []
        while True:  # Kafka answers in request order: requests before this one lost their responses
            p = self._pending.popleft()
            n = self._pending_ids[p.correlation_id] - 1
            if n:
                self._pending_ids[p.correlation_id] = n
            else:
                del self._pending_ids[p.correlation_id]
            if p.correlation_id == corr:
                break
            out.extend(self._missing(p))
        if p.api_key in _SESSION_APIS:
            # a version the codec does not read was warned about at its request: its response is not decoded
            resp = self._decode_response(p, fr, self._names()) if codec.decodes_response(p.api_key, p.api_version) else None
            out.append(self._exchange(p, fr, resp))
        elif p.api_key == METADATA and codec.decodes_response(METADATA, p.api_version):
            resp = self._decode_response(p, fr, None)
            if resp is not None:
                self.ctx.topic_names.setdefault(self._broker_s, {}).update(resp.names)
                rep.topic_names.update(resp.names)
        return out

    def _decode_response(self, p: _Pending, fr: Frame, names: dict[str, str] | None):
        """The response body, or None with a counted warning when it cannot be read."""
        try:
            off = response_body_offset(fr.payload, p.api_key, p.api_version)
            return codec.decode_response(p.api_key, p.api_version, fr.payload[off:], names, rows=self.ctx.rows)
        except (codec.CodecError, HeaderError) as exc:
            self.ctx.report.warn("malformed_response", f"frame {fr.frame}: {exc}")
            return None

    def _names(self) -> dict[str, str] | None:
        return self.ctx.topic_names.get(self._broker_s)

    def _missing(self, p: _Pending) -> list[Found]:
        if p.api_key not in _SESSION_APIS:
            return []
        return [self._exchange(p, None, None)]

    def _exchange(self, p: _Pending, fr: Frame | None, resp) -> Exchange:
        rep = self.ctx.report
        rep.exchanges += 1
        if resp is None:
            rep.responses_missing += fr is None
        q = p.body
        return _new_exchange(
            file=self.ctx.file, conn=self.conn, request_frame=p.frame, response_frame=None if fr is None else fr.frame,
            ts=p.ts, response_ts=None if fr is None else fr.ts, client=self._client_s, broker=self._broker_s,
            api_key=p.api_key, api_version=p.api_version, correlation_id=p.correlation_id, client_id=p.client_id,
            client_software=self._software,
            replica_id=q.replica_id if q else None, session_id=q.session_id if q else None,
            session_epoch=q.session_epoch if q else None, max_wait_ms=q.max_wait_ms if q else None,
            min_bytes=q.min_bytes if q else None, max_bytes=q.max_bytes if q else None,
            isolation_level=q.isolation_level if q else None, rack_id=q.rack_id if q else None,
            error_code=resp and resp.error_code, response_session_id=resp and resp.session_id,
            throttle_time_ms=resp and resp.throttle_time_ms, request_bytes=p.size,
            response_bytes=None if fr is None else fr.size,
            request_partitions=q.partitions if q else (), forgotten_partitions=q.forgotten if q else (),
            response_partitions=resp.partitions if resp else None,
        )

    def _count_framer_skips(self) -> None:
        for f in (self._req, self._resp):
            if f is not None:
                self.ctx.report.skipped_bytes += f.skipped_bytes
                f.skipped_bytes = 0


def _next_request_at(raw: bytes, p: int, key: bytes, last_corr: int) -> bool:
    """Does this client's next request (by client id `key` and a correlation id just after `last_corr`) start
    at raw[p]?"""
    if not plausible_request_start(raw, p, MAX_FRAME) or not raw.startswith(key, p + 12):
        return False
    corr = _I32.unpack_from(raw, p + 8)[0]
    return 1 <= (corr - last_corr) % 0x80000000 <= CORRELATION_WINDOW


def _client_key(payload) -> bytes:
    """The client id as a request header carries it: int16 length (-1: null) and the bytes."""
    n = int.from_bytes(payload[8:10], "big", signed=True)
    return bytes(payload[8 : 10 + max(n, 0)])


def _request_ids(prefix, deep: bool) -> set[int]:
    """Correlation ids of the consecutive plausible request frames from the first one in `prefix`: at its start,
    or, when `deep`, further on (within DEEP_SCAN bytes) when the capture began inside a request (resync.py;
    a candidate still waiting for more bytes counts here: which side answers decides)."""
    ids: set[int] = set()
    raw = bytes(prefix)
    pos: int | None
    if plausible_request_start(raw, 0, MAX_FRAME):
        pos = 0
    elif deep:
        found = scan_first_request(raw[:DEEP_SCAN], 0)
        pos = found[0] if found[0] is not None else (found[1] if len(found) > 2 else None)  # (None, p, 0): waits
    else:
        pos = None
    if pos is None:
        return ids
    while pos == 0 or plausible_request_start(raw, pos, MAX_FRAME):  # a found start is plausible already
        ids.add(_I32.unpack_from(raw, pos + 8)[0])
        pos += 4 + _I32.unpack_from(raw, pos)[0]
    return ids


def _answered(prefix, ids: set[int]) -> int:
    """How many of these correlation ids the other direction answers: framed from its first byte, or, unless
    that framing chains exactly to its end, found anywhere in it (resync.py): the capture may have begun inside
    a response, whose first bytes then read as a size that breaks or runs past the end."""
    pos = 0
    seen: set[int] = set()
    while len(prefix) - pos >= 8:
        size = _I32.unpack_from(prefix, pos)[0]
        if not 4 <= size <= MAX_FRAME:
            break
        corr = _I32.unpack_from(prefix, pos + 4)[0]
        if corr in ids:
            seen.add(corr)
        pos += 4 + size
    if seen or pos == len(prefix):
        return len(seen)
    return answered_ids(bytes(prefix), ids)
