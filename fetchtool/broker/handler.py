"""The broker's sans-IO core: one request frame + now_ms in, one action out.

Actions: Reply(frame) to write, NoReply (Produce acks=0), Wait(pending fetch) for the server to complete
later, Close(reason) when no Kafka answer can be formed. Client-caused problems never raise.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from fetchtool.broker import apis, wire
from fetchtool.broker.fetch import FetchService, PendingFetch
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


Action = Reply | NoReply | Wait | Close


class BrokerCore:
    def __init__(self, config: BrokerConfig, log: logging.Logger | None = None) -> None:
        self.state = BrokerState(config=config, log=log or logging.getLogger("fetchtool.broker"))
        self.state.port = config.port
        self.fetch = FetchService(self.state)
        self.counters: dict[str, int] = {}

    def count(self, what: str) -> None:
        self.counters[what] = self.counters.get(what, 0) + 1

    def handle_frame(self, frame: bytes, client: str, now_ms: int) -> Action:
        try:
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
        if request.api_key == FETCH:
            response, pending = self.fetch.begin(request, client, now_ms)
            if pending is not None:
                return Wait(pending)
            return Reply(wire.encode_response(request.correlation_id, response))
        response = apis.HANDLERS[request.api_key](self.state, request.body)
        if response is None:
            return NoReply()
        return Reply(wire.encode_response(request.correlation_id, response))

    def complete_fetch(self, pending: PendingFetch, now_ms: int) -> Reply:
        response = self.fetch.complete(pending, now_ms)
        return Reply(wire.encode_response(pending.request.correlation_id, response))

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
