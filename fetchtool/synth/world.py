"""A scripted world for synthetic captures: brokers driven by the session engine, clients on TCP connections.

Both sides come from fetchtool.sessions: the broker's answer is FetchManager.new_context +
update_and_generate_response over a small in-memory log; well-behaved clients use FetchSessionHandler, and
misbehaving scripted clients pass their own (session id, epoch). Messages are encoded with
fetchtool.protocol.codec (kio) and written with fetchtool.capture.writer, so the capture holds real wire bytes.

Requests and responses are separate steps (`Connection.request`, `Connection.respond`) so a script can pipeline
requests, lose a response, or reset a connection in between. The broker processes a request when it responds.
`World.expect(...)` records the findings the script's construction implies, for the scenario's expected.json.
"""

from __future__ import annotations

import datetime
import io
import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from fetchtool.capture.events import Endpoint
from fetchtool.capture.writer import LINKTYPE_ETHERNET, PcapWriter, TcpConversation
from fetchtool.exchange import ForgottenPartition, RequestPartition, ResponsePartition
from fetchtool.protocol import messages
from fetchtool.protocol.codec import FetchRequestBody, FetchResponseBody, encode_request, encode_response
from fetchtool.protocol.headers import FETCH, FETCH_SNAPSHOT
from fetchtool.sessions import (FetchManager, FetchMetadata, FetchOutcome, FetchSessionCache, FetchSessionHandler,
                                PartitionData, PartitionResult, TopicIdPartition, TopicPartition)  # fmt: skip

START = 1_700_000_000.0
_STAMP = datetime.datetime(2023, 11, 14, tzinfo=datetime.timezone.utc)


def topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_DNS, f"fetchtool.synth.{name}")


def record_batch(count: int, value_size: int = 40) -> bytes:
    """One uncompressed magic-2 batch of `count` records (deterministic bytes)."""
    from kio.records.schema import NewRecordBatch, Record
    from kio.records.writers import write_new_batch
    from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

    # kio's phantom types: parse() checks the range and returns the very value, typed
    records = tuple(Record(attributes=i8.parse(0), timestamp=TZAwareMicros.parse(_STAMP), offset=i64.parse(i), key=None,
                           value=b"v" * value_size, headers=())
                    for i in range(count))  # fmt: skip
    buf = io.BytesIO()
    write_new_batch(buf, NewRecordBatch(producer_id=i64.parse(-1), producer_epoch=i16.parse(-1),
                                        base_sequence=i32.parse(-1), records=records,
                                        attributes=i16.parse(0)))  # fmt: skip
    return buf.getvalue()


class Broker:
    """A broker: an address, a session cache (the engine) and, per partition, a high watermark.

    ``holds_empty_fetches``: answer a fetch that found nothing after its MaxWaitMs, as Kafka's purgatory does
    (ReplicaManager.fetchMessages). The older scenarios answer at once (their committed captures stay as they
    are); scenarios about timing set it. ``errors``: partitions answered with an error code instead of data."""

    def __init__(self, world: World, ip: str, port: int, slots: int, shards: int,
                 holds_empty_fetches: bool = False) -> None:  # fmt: skip
        self.world = world
        self.endpoint = Endpoint(ip, port)
        self.slots, self.shards = slots, shards
        self.manager = FetchManager(FetchSessionCache(slots, shards, rng=random.Random(world.seed)))
        self.hw: dict[tuple[str, int], int] = {}
        self.batch_records = 5  # records per batch returned
        self.holds_empty_fetches = holds_empty_fetches
        self.errors: dict[tuple[str, int], int] = {}

    def restart(self) -> None:
        """Sessions live only in memory: a restart loses them all."""
        self.manager = FetchManager(FetchSessionCache(self.slots, self.shards, rng=random.Random(self.world.seed + 1)))

    def produce(self, topic: str, partition: int, records: int) -> None:
        self.hw[(topic, partition)] = self.hw.get((topic, partition), 0) + records

    def read(self, tip: TopicIdPartition, data: PartitionData) -> tuple[PartitionResult, bytes | None]:
        if tip.topic is None:  # a topic id this broker cannot name: nothing was produced to it
            return PartitionResult(high_watermark=0, last_stable_offset=0, log_start_offset=0, records_size=0), None
        error = self.errors.get((tip.topic, tip.partition))
        if error:  # Kafka answers an error partition with no records and offsets of -1
            return PartitionResult(error_code=error), None
        hw = self.hw.get((tip.topic, tip.partition), 0)
        n = min(self.batch_records, max(0, hw - data.fetch_offset))
        blob = record_batch(n) if n else None
        return PartitionResult(high_watermark=hw, last_stable_offset=hw, log_start_offset=0,
                               records_size=len(blob) if blob else 0), blob  # fmt: skip


@dataclass
class Pending:
    """A request on the wire, waiting for the broker's answer."""

    version: int
    correlation_id: int
    meta: FetchMetadata
    fetch_data: dict[TopicIdPartition, PartitionData]
    forgotten: list[TopicIdPartition]
    max_bytes: int
    request_frame: int | None  # None: sent before the capture started
    ts: float
    response_frame: int | None = None
    outcome: FetchOutcome | None = None
    extra: dict = field(default_factory=dict)
    max_wait_ms: int = 500
    min_bytes: int = 1

    @property
    def answer(self) -> FetchOutcome:
        """The broker's outcome, for a script that reads it after respond()."""
        if self.outcome is None:
            raise RuntimeError(f"request {self.correlation_id} read before the broker answered it")
        return self.outcome


class Connection:
    def __init__(self, world: World, broker: Broker, ip: str, port: int, client_id: str, handshake: bool) -> None:
        self.world, self.broker, self.client_id = world, broker, client_id
        self.endpoint = Endpoint(ip, port)
        self.conv = TcpConversation(world.out, self.endpoint, broker.endpoint, client_isn=port * 7,
                                    server_isn=port * 11)  # fmt: skip
        self.correlation = 0
        if handshake and not world.silent:
            world.t = self.conv.handshake(world.t)

    @property
    def address(self) -> str:
        return str(self.endpoint)

    def request(self, meta: FetchMetadata, partitions: dict[tuple[str, int], int], *, version: int = 12,
                forget: Sequence[tuple[str, int]] = (), max_bytes: int = 52428800, partition_max_bytes: int = 1048576,
                max_wait_ms: int = 500, min_bytes: int = 1) -> Pending:  # fmt: skip
        w = self.world
        w.tick()
        self.correlation += 1
        ids = version >= 13
        data: dict[TopicIdPartition, PartitionData] = {}
        for (t, p), off in partitions.items():
            tid = topic_id(t) if ids else uuid.UUID(int=0)
            data[TopicIdPartition(tid, t, p)] = PartitionData(off, max_bytes=partition_max_bytes, topic_id=tid)
        forgotten = [TopicIdPartition(topic_id(t) if ids else uuid.UUID(int=0), t, p) for t, p in forget]
        frame = messages.fetch_request(
            version, self.correlation, self.client_id, meta.session_id, meta.epoch,
            (RequestPartition(k.topic, str(k.topic_id) if ids else None, k.partition, d.fetch_offset, d.max_bytes,
                              -1, -1, -1) for k, d in data.items()),
            (ForgottenPartition(k.topic, str(k.topic_id) if ids else None, k.partition) for k in forgotten),
            max_bytes=max_bytes, max_wait_ms=max_wait_ms, min_bytes=min_bytes)  # fmt: skip
        ts = w.t
        if w.silent:  # before the capture starts: the bytes pass, the writer does not see them
            self.conv.next["client"] = (self.conv.next["client"] + len(frame)) & 0xFFFFFFFF
            return Pending(version, self.correlation, meta, data, forgotten, max_bytes, None, ts,
                           max_wait_ms=max_wait_ms, min_bytes=min_bytes)
        w.t = self.conv.send("client", frame, w.t, ack=False)
        return Pending(version, self.correlation, meta, data, forgotten, max_bytes, w.out.frames, ts,
                       max_wait_ms=max_wait_ms, min_bytes=min_bytes)

    def respond(self, req: Pending, *, outcome: FetchOutcome | None = None, records: dict | None = None,
                throttle_ms: int = 0, lost: bool = False) -> FetchOutcome:  # fmt: skip
        """The broker answers `req`: through the engine, or with a scripted `outcome` (+ `records` blobs)."""
        w = self.world
        w.tick()
        blobs = dict(records or {})
        if outcome is None:
            ctx = self.broker.manager.new_context(w.now_ms, req.version, req.meta, False, req.fetch_data,
                                                  req.forgotten, {topic_id(t): t for t, _ in self.broker.hw})  # fmt: skip
            results = {}
            for tip, data in ctx.partitions():
                results[tip], blobs[tip] = self.broker.read(tip, data)
            outcome = (ctx.throttled_response(throttle_ms) if throttle_ms
                       else ctx.update_and_generate_response(w.now_ms, results))  # fmt: skip
            if self.broker.holds_empty_fetches and not throttle_ms and _parked(req, outcome):
                w.advance(req.max_wait_ms / 1000)
        ids = req.version >= 13
        parts, recs = [], []
        for tip, r in outcome.partitions:
            parts.append(ResponsePartition(tip.topic, str(tip.topic_id) if ids else None, tip.partition, r.error_code,
                                           r.high_watermark, r.last_stable_offset, r.log_start_offset, -1, -1, -1,
                                           r.records_size, 0, 0, None))  # fmt: skip
            recs.append(blobs.get(tip))
        body = FetchResponseBody(throttle_time_ms=outcome.throttle_time_ms, error_code=outcome.error_code,
                                 session_id=outcome.session_id, partitions=tuple(parts), records=tuple(recs))
        frame = messages.response_frame(FETCH, req.version, req.correlation_id,
                                        encode_response(FETCH, req.version, body))
        req.outcome = outcome
        if w.silent:  # before the capture: delivered, so the stream goes on after these bytes
            self.conv.next["server"] = (self.conv.next["server"] + len(frame)) & 0xFFFFFFFF
            return outcome
        if lost:  # processed by the broker, lost on the way: neither the client nor the capture saw it
            return outcome
        w.t = self.conv.send("server", frame, w.t, ack=False)
        req.response_frame = w.out.frames
        req.outcome = outcome
        return outcome

    def snapshot(self, topic: str, partition: int, snapshot_id: tuple[int, int], position: int, *, size: int,
                 chunk: int, error: int = 0, replica_id: int = 2) -> tuple[int, int]:  # fmt: skip
        """A FetchSnapshot (KIP-630) exchange, scripted on both sides (the engine has no snapshot state).
        Returns (request frame, response frame)."""
        w = self.world
        w.tick()
        self.correlation += 1
        end, epoch = snapshot_id
        req = FetchRequestBody(replica_id=replica_id, max_wait_ms=None, min_bytes=None, max_bytes=chunk,
                               isolation_level=None, session_id=None, session_epoch=None, rack_id=None,
                               partitions=(RequestPartition(topic, None, partition, position, -1, -1, 5, -1, end,
                                                            epoch),))  # fmt: skip
        frame = messages.request_frame(FETCH_SNAPSHOT, 0, self.correlation, self.client_id,
                                       encode_request(FETCH_SNAPSHOT, 0, req))
        w.t = self.conv.send("client", frame, w.t, ack=False)
        request_frame = w.out.frames
        w.tick()
        data = b"" if error else bytes((position + i) % 251 for i in range(max(0, min(chunk, size - position))))
        resp = FetchResponseBody(throttle_time_ms=0, error_code=0, session_id=None, partitions=(
            ResponsePartition(topic, None, partition, error, size, -1, position, -1, -1, -1, len(data), 0, 0, None,
                              end, epoch),), records=(data,))  # fmt: skip
        frame = messages.response_frame(FETCH_SNAPSHOT, 0, self.correlation, encode_response(FETCH_SNAPSHOT, 0, resp))
        w.t = self.conv.send("server", frame, w.t, ack=False)
        return request_frame, w.out.frames

    def fetch(self, meta: FetchMetadata, partitions: dict[tuple[str, int], int], **kw) -> Pending:
        req = self.request(meta, partitions, **kw)
        self.respond(req)
        return req

    def close(self, *, rst: str | None = None) -> None:
        self.world.t = self.conv.close(self.world.t, rst=rst)


def _parked(req: Pending, outcome: FetchOutcome) -> bool:
    """Would Kafka's purgatory hold this fetch until MaxWait? Nothing read, no error, and it asked to wait."""
    return (req.max_wait_ms > 0 and req.min_bytes > 0 and outcome.error_code == 0 and bool(req.fetch_data or
            outcome.session_id) and not any(r.records_size or r.error_code for _t, r in outcome.partitions))


class JavaLikeClient:
    """A well-behaved consumer: Kafka's FetchSessionHandler per broker; positions advance with the records."""

    def __init__(self, conn: Connection, partitions: list[tuple[str, int]], version: int = 12,
                 max_wait_ms: int = 500) -> None:  # fmt: skip
        self.conn = conn
        self.version = version
        self.max_wait_ms = max_wait_ms
        self.handler = FetchSessionHandler(node_id=1)
        self.positions = {tp: 0 for tp in partitions}

    def build(self):
        b = self.handler.new_builder()
        ids = self.version >= 13
        for (t, p), off in self.positions.items():
            b.add(TopicPartition(t, p), PartitionData(off, topic_id=topic_id(t) if ids else uuid.UUID(int=0)))
        return b.build()

    def request(self) -> tuple[Pending, object]:
        data = self.build()
        sent = {(tp.topic, tp.partition): d.fetch_offset for tp, d in data.to_send.items()}
        forget = [(k.topic, k.partition) for k in data.forgotten_for_version(self.version)]
        return self.conn.request(data.metadata, sent, version=self.version, forget=forget,
                                 max_wait_ms=self.max_wait_ms), data

    def handle(self, req: Pending) -> bool:
        o = req.answer
        # as Kafka's FetchResponse.responseData: a topic id the client cannot name is not a partition it handles
        tps = [TopicPartition(t.topic, t.partition) for t, _ in o.partitions if t.topic is not None]
        ok = self.handler.handle_response(o.error_code, o.session_id, o.throttle_time_ms, tps,
                                          {t.topic_id for t, _ in o.partitions}, req.version)  # fmt: skip
        if ok:
            for tip, r in o.partitions:
                if r.records_size and tip.topic is not None:
                    key = (tip.topic, tip.partition)
                    self.positions[key] = min(r.high_watermark, self.positions[key] + self.conn.broker.batch_records)
        return ok

    def poll(self) -> Pending:
        req, _ = self.request()
        self.conn.respond(req)
        self.handle(req)
        return req


class World:
    def __init__(self, path, *, seed: int = 7) -> None:
        self.seed = seed
        self.out = PcapWriter(path, LINKTYPE_ETHERNET)
        self.t = START
        self.expected: list[dict] = []
        self.silent = False  # True: nothing is written (the part of the story before the capture starts)
        self.file = getattr(path, "name", str(path)).rsplit("/", 1)[-1]

    @property
    def now_ms(self) -> int:
        return int(round((self.t - START) * 1000))

    def tick(self, seconds: float = 0.001) -> None:
        self.t += seconds

    def advance(self, seconds: float) -> None:
        self.t += seconds

    def broker(self, ip: str = "10.0.0.100", port: int = 9092, *, slots: int = 1000, shards: int = 8,
               holds_empty_fetches: bool = False) -> Broker:  # fmt: skip
        return Broker(self, ip, port, slots, shards, holds_empty_fetches)

    def connect(self, broker: Broker, ip: str, port: int, client_id: str, *, handshake: bool = True) -> Connection:
        return Connection(self, broker, ip, port, client_id, handshake)

    def expect(self, code: str, cause: str | None = None, req: Pending | None = None, conn: Connection | None = None,
               **extra) -> None:  # fmt: skip
        """Record a finding the construction implies (frames of the exchange that shows it)."""
        e: dict[str, object] = {"code": code, "cause": cause}
        if req is not None:
            e["request_frame"] = req.request_frame
            e["response_frame"] = req.response_frame
            e["session_id"] = req.meta.session_id
        if conn is not None:
            e["client"] = conn.address
            e["broker"] = str(conn.broker.endpoint)
        e.update(extra)
        self.expected.append(e)

    def close(self) -> None:
        self.out.close()
