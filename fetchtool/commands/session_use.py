"""Sessions a client asked for and did not get, or got and never used: what a timeline of the sessions that
exist cannot show ("No fetch sessions" for a client refused 109 times).

A refusal is a session-creating Fetch (v7+, session id 0, epoch 0) answered without error but with session id 0:
the broker's cache had no room, or it does not grant sessions. A session never used is one created in the capture
that no incremental fetch followed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fetchtool.exchange import Exchange

FETCH = 1
FIRST_SESSION_VERSION = 7  # KIP-227


@dataclass
class Refusals:
    client: str           # the client as sessions names it: client id@host
    broker: str
    count: int = 0
    first_frame: int | None = None
    last_frame: int | None = None
    first_ts: float | None = None

    def to_json(self) -> dict:
        return {"client": self.client, "broker": self.broker, "refused": self.count,
                "first_request_frame": self.first_frame, "last_request_frame": self.last_frame}


@dataclass
class RefusalTally:
    only: object = None  # the --client / --broker rule for an exchange (fetchtool.analysis.run.concerns), or None
    by_client: dict[tuple[str, str], Refusals] = field(default_factory=dict)

    def tap(self, items):
        """The items as they are, counting the refused session-creating fetches on the way."""
        for item in items:
            if type(item) is Exchange and refused(item) and (self.only is None or self.only(item)):
                key = (label(item.client_id, item.client), item.broker)
                r = self.by_client.get(key)
                if r is None:
                    r = self.by_client[key] = Refusals(*key, first_frame=item.request_frame, first_ts=item.ts)
                r.count += 1
                r.last_frame = item.request_frame
            yield item

    def most_first(self) -> list[Refusals]:
        return sorted(self.by_client.values(), key=lambda r: (-r.count, r.client, r.broker))


def refused(ex: Exchange) -> bool:
    return (ex.api_key == FETCH and ex.api_version >= FIRST_SESSION_VERSION and ex.session_id == 0
            and ex.session_epoch == 0 and ex.error_code == 0 and ex.response_session_id == 0)


def label(client_id: str | None, address: str | None) -> str:
    host = (address or "?").rsplit(":", 1)[0]
    return f"{client_id or '?'}@{host}"


def never_used(sessions) -> list:
    """Sessions created in the capture that no incremental fetch used."""
    return [s for s in sessions if not s.started_before_capture and s.incremental_requests == 0]
