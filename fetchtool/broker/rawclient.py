"""A minimal blocking Kafka client speaking kio entities: for tests, benchmarks and scripted scenarios.

    with RawClient("127.0.0.1", port) as c:
        response = c.call(FetchRequest(...))          # send one request, wait for its response
        c.send(req1); c.send(req2); c.receive(); ...  # or pipeline
"""

from __future__ import annotations

import collections
import socket
import struct
import typing

from fetchtool.broker import wire

_SIZE = struct.Struct(">i")


class RawClient:
    def __init__(self, host: str, port: int, client_id: str = "fetchtool-raw", timeout: float = 10.0,
                 source_address: str | None = None) -> None:
        """`source_address`: the local address to connect from (e.g. 127.0.0.2, to be another client address)."""
        source = (source_address, 0) if source_address is not None else None
        self.sock = socket.create_connection((host, port), timeout=timeout, source_address=source)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self._correlation = 0
        self._inflight: collections.deque[tuple[int, int, int]] = collections.deque()  # (corr, key, version)
        self._buf = bytearray()

    def send(self, request: typing.Any) -> int:
        self._correlation += 1
        key = int(request.__api_key__)
        self.sock.sendall(wire.encode_request(key, self._correlation, request, self.client_id))
        self._inflight.append((self._correlation, key, int(request.__version__)))
        return self._correlation

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        """One response frame body; raises ConnectionError if the broker closed the connection."""
        while True:
            if len(self._buf) >= 4:
                (size,) = _SIZE.unpack_from(self._buf, 0)
                if len(self._buf) >= 4 + size:
                    frame = bytes(self._buf[4 : 4 + size])
                    del self._buf[: 4 + size]
                    return frame
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("broker closed the connection")
            self._buf += chunk

    def receive(self) -> typing.Any:
        corr, key, version = self._inflight.popleft()
        got, response = wire.decode_response(self.read_frame(), key, version)
        if got != corr:
            raise ValueError(f"correlation id {got} where {corr} was expected")
        return response

    def call(self, request: typing.Any) -> typing.Any:
        self.send(request)
        return self.receive()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_batch(values: typing.Sequence[bytes], key: bytes | None = None) -> bytes:
    """One magic-2 record batch (uncompressed, base offset 0) holding `values`, built with kio's writer."""
    import datetime
    import io

    from kio.records.schema import NewRecordBatch, Record
    from kio.records.writers import write_new_batch
    from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

    now = TZAwareMicros.parse(datetime.datetime.now(datetime.timezone.utc))
    records = tuple(
        Record(attributes=i8(0), timestamp=now, offset=i64(i), key=key, value=v, headers=())
        for i, v in enumerate(values)
    )
    buf = io.BytesIO()
    write_new_batch(buf, NewRecordBatch(producer_id=i64(-1), producer_epoch=i16(-1), base_sequence=i32(-1),
                                        records=records, attributes=i16(0)))
    return buf.getvalue()
