"""One client connection: bytes -> frames -> BrokerCore actions -> bytes, one request at a time.

Like Kafka's SocketServer, a connection is muted while its request is being handled (including a delayed
fetch), so responses leave in request order. A bad frame closes only this connection; replies already
queued before it are flushed first.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import typing

from fetchtool.broker.handler import Close, NoReply, Reply, Wait

if typing.TYPE_CHECKING:
    from fetchtool.broker.server import Broker

_SIZE = struct.Struct(">i")
_READ_CHUNK = 256 * 1024


class FrameError(Exception):
    pass


class FrameBuffer:
    """Sans-IO framing: feed bytes, take complete frame bodies (int32 size prefix removed)."""

    def __init__(self, max_frame_bytes: int) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()

    def feed(self, data: bytes) -> None:
        self._buf += data

    @property
    def partial(self) -> bool:
        return bool(self._buf)

    def frames(self) -> typing.Iterator[bytes]:
        while len(self._buf) >= 4:
            (size,) = _SIZE.unpack_from(self._buf, 0)
            if size < 0:
                raise FrameError(f"negative frame size {size}")
            if size > self.max_frame_bytes:
                raise FrameError(f"frame of {size} bytes exceeds the {self.max_frame_bytes}-byte limit")
            if len(self._buf) < 4 + size:
                return
            frame = bytes(self._buf[4 : 4 + size])
            del self._buf[: 4 + size]
            yield frame


class Connection:
    def __init__(self, broker: Broker, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.broker = broker
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername") or ("?", 0)
        self.client = f"{peer[0]}:{peer[1]}"
        self.frames = FrameBuffer(broker.config.max_frame_bytes)
        self.task: asyncio.Task | None = None

    async def run(self) -> None:
        log = self.broker.log
        reason, level = "closed by client", logging.INFO
        try:
            reason, misbehaved = await self._loop()
            if misbehaved:
                level = logging.WARNING
        except FrameError as exc:
            self.broker.core.count("bad_frame")
            reason, level = str(exc), logging.WARNING
        except asyncio.TimeoutError:
            self.broker.core.count("timeout")
            if self.frames.partial:
                reason, level = "stalled mid-frame, timed out", logging.WARNING
            else:
                reason = "idle, timed out"
        except (ConnectionError, OSError) as exc:
            reason = f"connection error: {exc.__class__.__name__}"
        except asyncio.CancelledError:
            reason = "dropped by broker"
            raise
        except Exception as exc:  # a broker bug: keep serving everyone else, say what happened in one line
            self.broker.core.count("internal_error")
            reason, level = f"internal error {exc.__class__.__name__}: {exc}", logging.ERROR
        finally:
            # A client that broke the protocol is logged above INFO, so it shows without --verbose.
            log.log(level, "connection %s closed: %s", self.client, reason)
            await self._close()

    async def _loop(self) -> tuple[str, bool]:
        """Serve frames until the connection ends: (why, whether the client broke the protocol)."""
        core, config = self.broker.core, self.broker.config
        while True:
            timeout_ms = config.partial_frame_timeout_ms if self.frames.partial else config.idle_timeout_ms
            data = await asyncio.wait_for(self.reader.read(_READ_CHUNK), timeout_ms / 1000)
            if not data:
                return "closed by client", False
            self.frames.feed(data)
            try:
                for frame in self.frames.frames():
                    appended = core.state.appended
                    action = core.handle_frame(frame, self.client, self.broker.now_ms())
                    if core.state.appended != appended:
                        self.broker.notify_appended()
                    if isinstance(action, Wait):
                        await self.writer.drain()
                        action = await self.broker.wait_for_fetch(action.pending)
                    if isinstance(action, Reply):
                        self.writer.write(action.frame)
                    elif isinstance(action, Close):
                        return action.reason, True
                    else:
                        assert isinstance(action, NoReply)
            finally:
                # Replies to the frames before a bad one are not lost.
                if not self.writer.is_closing():
                    await self.writer.drain()

    async def _close(self) -> None:
        self.broker.connections.pop(self.client, None)
        if not self.writer.is_closing():
            self.writer.close()
        try:
            await asyncio.wait_for(self.writer.wait_closed(), 1)
        except (Exception, asyncio.CancelledError):
            pass

    def abort(self) -> None:
        """Drop the connection as a network failure would (no FIN handshake, unsent bytes discarded)."""
        self.writer.transport.abort()
        if self.task is not None:
            self.task.cancel()
