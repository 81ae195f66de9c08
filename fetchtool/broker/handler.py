"""The broker's sans-IO core: one request frame + now_ms in, one action out.

Actions: Reply(frame) to write, NoReply (Produce acks=0), Wait(pending fetch) for the server to complete
later, Close(reason) when no Kafka answer can be formed. Client-caused problems never raise; a bug in a handler
closes that one connection (Close with internal=True), never the broker.

Heavy requests: `handle_frame_steps` / `complete_fetch_steps` are generators that yield None between slices of
work (the server answers other clients then) and Offload(work) for pure work on immutable values (decoding and
encoding a large frame), which the server may run on a worker thread and send back the result.
`handle_frame` / `complete_fetch` run them inline.
"""

from __future__ import annotations

import logging
import typing
from dataclasses import dataclass

from fetchtool.broker import apis, wire
from fetchtool.broker.fetch import SLICE, FetchService, PendingFetch
from fetchtool.broker.state import BrokerConfig, BrokerState

FETCH = 1
API_VERSIONS = 18


@dataclass(frozen=True, slots=True)
class Reply:
    frame: bytes


@dataclass(frozen=True, slots=True)
class NoReply:
    pass


@dataclass(frozen=True, slots=True)
class Wait:
    pending: PendingFetch


@dataclass(frozen=True, slots=True)
class Close:
    reason: str
    internal: bool = False  # a broker bug, not the client's fault


Action = Reply | NoReply | Wait | Close

# Frames at least this large are decoded, and responses encoded, as Offload work (a worker thread in the server):
# kio takes about 1 s per 100,000 partitions. Smaller ones cost less than the hand-over.
OFFLOAD_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class Offload:
    """Pure work on immutable values; the driver sends back work()'s result."""

    work: typing.Callable[[], typing.Any]


Step = Offload | None
ActionSteps = typing.Generator[Step, typing.Any, Action]


def run_inline(steps: ActionSteps) -> Action:
    """Drive a stepped request to its end on the caller's thread."""
    value: typing.Any = None
    error: Exception | None = None
    while True:
        try:
            step = steps.throw(error) if error is not None else steps.send(value)
        except StopIteration as done:
            return typing.cast(Action, done.value)
        value, error = None, None
        if step is not None:
            try:
                value = step.work()
            except Exception as exc:  # raised inside the request's steps, where its handler is
                error = exc


class BrokerCore:
    def __init__(self, config: BrokerConfig, log: logging.Logger | None = None) -> None:
        self.state = BrokerState(config=config, log=log or logging.getLogger("fetchtool.broker"))
        self.state.port = config.port
        self.fetch = FetchService(self.state)
        self.counters: dict[str, int] = {}

    def count(self, what: str) -> None:
        self.counters[what] = self.counters.get(what, 0) + 1

    def handle_frame(self, frame: bytes, client: str, now_ms: int) -> Action:
        return run_inline(self.handle_frame_steps(frame, client, now_ms))

    def handle_frame_steps(self, frame: bytes, client: str, now_ms: int) -> ActionSteps:
        """`handle_frame` in steps; a handler that raises closes this connection only (Close internal)."""
        try:
            if len(frame) >= OFFLOAD_BYTES:
                request = yield Offload(lambda: wire.decode_request(frame, apis.SUPPORTED))
            else:
                request = wire.decode_request(frame, apis.SUPPORTED)
        except wire.UnsupportedVersion as exc:
            return self._unsupported(exc, client)
        except wire.UnknownApiKey as exc:
            self.count("unknown_api_key")
            return Close(str(exc))
        except wire.MalformedFrame as exc:
            self.count("malformed")
            return Close(str(exc))
        self.count(f"api_{request.api_key}")
        try:
            if request.api_key == FETCH:
                response, pending = yield from self.fetch.begin_steps(request, client, now_ms)
                if pending is not None:
                    return Wait(pending)
            else:
                response = apis.HANDLERS[request.api_key](self.state, request.body)
                if response is None:
                    return NoReply()
            heavy = len(frame) >= OFFLOAD_BYTES or _fetch_partitions(request.api_key, response) >= SLICE
            return (yield from self._reply(request.correlation_id, response, heavy))
        except Exception as exc:  # a broker bug: this connection ends, everyone else is served
            return self._internal_error(request, exc)

    def complete_fetch(self, pending: PendingFetch, now_ms: int) -> Action:
        return run_inline(self.complete_fetch_steps(pending, now_ms))

    def complete_fetch_steps(self, pending: PendingFetch, now_ms: int) -> ActionSteps:
        try:
            response = yield from self.fetch.complete_steps(pending, now_ms)
            heavy = _fetch_partitions(FETCH, response) >= SLICE
            return (yield from self._reply(pending.request.correlation_id, response, heavy))
        except Exception as exc:
            return self._internal_error(pending.request, exc)

    def _reply(self, correlation_id: int, response: typing.Any, heavy: bool) -> ActionSteps:
        if heavy:
            frame = yield Offload(lambda: wire.encode_response(correlation_id, response))
        else:
            frame = wire.encode_response(correlation_id, response)
        return Reply(frame)

    def _internal_error(self, request: wire.Request, exc: Exception) -> Close:
        self.count("internal_error")
        detail = " ".join(str(exc).split())  # one log line, whatever the exception says
        return Close(f"internal error answering api key {request.api_key} v{request.api_version} "
                     f"({type(exc).__name__}: {detail})", internal=True)

    def _unsupported(self, exc: wire.UnsupportedVersion, client: str) -> Action:
        """Kafka closes the connection of a request in a version it does not serve, except ApiVersions (KIP-511),
        which it answers in v0 with UNSUPPORTED_VERSION and its own range, so the client can retry lower."""
        self.count("unsupported_version")
        key = int(exc.header.request_api_key)
        if key == API_VERSIONS:
            from kio.schema.api_versions.v0 import response as v0

            self.state.log.info("client %s: %s -> UNSUPPORTED_VERSION", client, exc)
            corr = int(exc.header.correlation_id)
            return Reply(wire.encode_response(corr, apis.api_versions_response(v0, apis.UNSUPPORTED_VERSION)))
        return Close(str(exc))


def _fetch_partitions(api_key: int, response: typing.Any) -> int:
    """How many partitions a Fetch response carries (what its encoding costs); 0 for other apis."""
    if api_key != FETCH:
        return 0
    return sum(len(t.partitions) for t in response.responses)
