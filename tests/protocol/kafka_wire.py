"""Build Kafka wire bytes and stream events for protocol tests (through fetchtool's own codec + headers)."""

from __future__ import annotations

from struct import pack

from fetchtool.capture.events import ConnectionClosed, Endpoint, StreamData, StreamGap
from fetchtool.exchange import RequestPartition, ResponsePartition
from fetchtool.protocol import codec
from fetchtool.protocol.headers import encode_request_header, encode_response_header

CLIENT = Endpoint("10.0.0.1", 51000)
BROKER = Endpoint("10.0.0.2", 9092)


def request_frame(api_key: int, version: int, corr: int, body, client_id: str | None = "consumer-1") -> bytes:
    raw = body if isinstance(body, (bytes, bytearray)) else codec.encode_request(api_key, version, body)
    msg = encode_request_header(api_key, version, corr, client_id) + raw
    return pack(">i", len(msg)) + msg


def response_frame(api_key: int, version: int, corr: int, body) -> bytes:
    raw = body if isinstance(body, (bytes, bytearray)) else codec.encode_response(api_key, version, body)
    msg = encode_response_header(api_key, version, corr) + raw
    return pack(">i", len(msg)) + msg


def fetch_request(n: int = 3, topic: str = "orders", session_id: int = 0, epoch: int = 0, topic_id=None):
    return codec.FetchRequestBody(
        max_wait_ms=500, min_bytes=1, max_bytes=52428800, session_id=session_id, session_epoch=epoch,
        partitions=tuple(
            RequestPartition(None if topic_id else topic, topic_id, p, 100 + p, 1048576, -1, 5, -1) for p in range(n)
        ),
    )


def fetch_response(n: int = 3, topic: str = "orders", session_id: int = 0, topic_id=None, records=None):
    parts = tuple(
        ResponsePartition(None if topic_id else topic, topic_id, p, 0, 200, 200, 0, -1, -1, -1, 0, 0, 0, None)
        for p in range(n)
    )
    return codec.FetchResponseBody(0, 0, session_id, parts, records)


class Link:
    """Turns byte strings into StreamData events with increasing frame numbers, like a reassembler would."""

    def __init__(self, conn: int = 1, client: Endpoint = CLIENT, broker: Endpoint = BROKER, ts: float = 1000.0):
        self.conn, self.client, self.broker = conn, client, broker
        self.frame = 0
        self.ts = ts

    def _next(self):
        self.frame += 1
        self.ts += 0.001
        return self.frame, self.ts

    def send(self, data: bytes, chunk: int | None = None, to_broker: bool = True) -> list[StreamData]:
        src, dst = (self.client, self.broker) if to_broker else (self.broker, self.client)
        chunk = chunk or len(data) or 1
        out = []
        for i in range(0, len(data), chunk):
            f, t = self._next()
            out.append(StreamData(self.conn, src, dst, data[i : i + chunk], f, t))
        return out

    def reply(self, data: bytes, chunk: int | None = None) -> list[StreamData]:
        return self.send(data, chunk, to_broker=False)

    def gap(self, lost: int, to_broker: bool = False) -> StreamGap:
        src, dst = (self.client, self.broker) if to_broker else (self.broker, self.client)
        f, t = self._next()
        return StreamGap(self.conn, src, dst, lost, f, t)

    def close(self) -> ConnectionClosed:
        f, t = self._next()
        return ConnectionClosed(self.conn, "fin", f, t)
