"""One client connection: bytes -> frames -> BrokerCore actions -> bytes, one request at a time.

Like Kafka's SocketServer, a connection is muted while its request is being handled (including a delayed
fetch), so responses leave in request order. A bad frame closes only this connection; replies already
queued before it are flushed first. So does a bug in a handler (logged once, as an ERROR line).

Time limits: a connection with nothing in flight is closed after idle_timeout_ms (Kafka's
connections.max.idle.ms); a frame must be complete within partial_frame_timeout_ms of its first byte, however
slowly its bytes trickle in (Kafka has no such bound: a peer sending a byte every few seconds holds its
connection until the idle timeout), so a slowloris holds a slot for at most that long.

Heavy requests run in steps (handler.handle_frame_steps): between slices the loop serves other connections, and
decoding/encoding a large frame runs on the broker's worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import sys
import typing

from fetchtool.broker.handler import ActionSteps, Close, NoReply, Reply, Wait

if typing.TYPE_CHECKING:
    from fetchtool.broker.server import Broker

_SIZE = struct.Struct(">i")
_READ_CHUNK = 256 * 1024


async def _read_within(reader: asyncio.StreamReader, timeout: float) -> bytes:
    # On Python 3.11+ without wait_for's extra task per read: a replay's embedded broker reads once per request.
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(timeout):
            return await reader.read(_READ_CHUNK)
    return await asyncio.wait_for(reader.read(_READ_CHUNK), timeout)


class FrameError(Exception):
    pass


class InternalError(Exception):
    """A handler failed (a broker bug); the message is the one log line."""


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

    def progress(self) -> str:
        """How much of the frame in progress has arrived, for the log."""
        if len(self._buf) < 4:
            return f"{len(self._buf)} of 4 size bytes received"
        (size,) = _SIZE.unpack_from(self._buf, 0)
        return f"{len(self._buf) - 4} of {size} bytes received"

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
        self.ip = str(peer[0])
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
            config = self.broker.config
            if self.frames.partial:
                self.broker.core.count("incomplete_frame_timeout")
                reason = (f"request not completed within {config.partial_frame_timeout_ms} ms of its first byte "
                          f"({self.frames.progress()})")
                level = logging.WARNING
            else:
                self.broker.core.count("idle_timeout")
                reason = f"idle for {config.idle_timeout_ms} ms (connections.max.idle.ms)"
        except (ConnectionError, OSError) as exc:
            reason = f"connection error: {exc.__class__.__name__}"
        except asyncio.CancelledError:
            reason = "dropped by broker"
            raise
        except InternalError as exc:  # counted by the core
            reason, level = str(exc), logging.ERROR
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
        loop = asyncio.get_running_loop()
        frame_deadline: float | None = None  # loop time by which the frame in progress must be complete
        while True:
            if not self.frames.partial:
                frame_deadline = None
                timeout = config.idle_timeout_ms / 1000
            else:
                if frame_deadline is None:
                    frame_deadline = loop.time() + config.partial_frame_timeout_ms / 1000
                timeout = max(frame_deadline - loop.time(), 0)
            data = await _read_within(self.reader, timeout)
            if not data:
                return "closed by client", False
            self.frames.feed(data)
            try:
                for frame in self.frames.frames():
                    frame_deadline = None  # the next frame's clock starts now
                    appended = core.state.appended
                    action = await self._run(core.handle_frame_steps(frame, self.client, self.broker.now_ms()))
                    if core.state.appended != appended:
                        self.broker.notify_appended()
                    if isinstance(action, Wait):
                        await self.writer.drain()
                        await self.broker.wait_for_fetch(action.pending)
                        action = await self._run(core.complete_fetch_steps(action.pending, self.broker.now_ms()))
                    if isinstance(action, Reply):
                        self.writer.write(action.frame)
                    elif isinstance(action, Close):
                        if action.internal:
                            raise InternalError(action.reason)
                        return action.reason, True
                    else:
                        assert isinstance(action, NoReply)
            finally:
                # Replies to the frames before a bad one are not lost.
                if not self.writer.is_closing():
                    await self.writer.drain()

    async def _run(self, steps: ActionSteps) -> typing.Any:
        """Drive a stepped request: other connections run between its slices; Offload work goes to the worker
        thread (its exception is raised inside the steps, where the request's error handling is)."""
        loop = asyncio.get_running_loop()
        value: typing.Any = None
        error: BaseException | None = None
        heavy = False  # a request that yields at all is a heavy one
        try:
            while True:
                try:
                    step = steps.throw(error) if error is not None else steps.send(value)
                except StopIteration as done:
                    return done.value
                if not heavy:
                    heavy = True
                    self.broker.gc_hold.enter()
                value, error = None, None
                if step is None:
                    await asyncio.sleep(0)
                    continue
                try:
                    value = await loop.run_in_executor(self.broker.worker, step.work)
                except Exception as exc:
                    error = exc
        finally:
            if heavy:
                self.broker.gc_hold.leave()

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
