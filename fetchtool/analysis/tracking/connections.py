"""A broker lost with every session in it, read from its connections.

When a broker dies (SIGKILL, a crash, its host gone) every connection to it is cut at once, with the requests in
flight on them never answered, and its clients come back on new connections once it accepts again. Its fetch
sessions die with it: the Java client answers the lost connection with (old id, 0) on the new one, so a restart
shows no error 70 at all; the story is in the connections.

`ConnectionState` is what the tracker keeps per connection (a few numbers); `broker_losses` reads them at the end.
A connection closed with nothing in flight moves to its broker's `ClosedConnections`: it can never be cut, but its
answers still show when the broker was alive (it lived on past a cut, or came back on a new connection).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import NamedTuple

IN_FLIGHT_GRACE_S = 1.0  # past a request's MaxWaitMs before its missing answer counts as a cut connection


class ConnectionState:
    """One client connection to a broker, as the exchanges show it."""

    __slots__ = ("conn", "client", "client_id", "order", "first_ts", "last_request_ts", "last_response_ts",
                 "in_flight", "cut_request_ts", "cut_request_frame", "cut_deadline", "named_id")

    def __init__(self, conn: int, client: str, client_id: str | None, ts: float, order: int) -> None:
        self.conn, self.client, self.client_id = conn, client, client_id
        self.order = order  # its rank among its broker's connections, by first exchange
        self.first_ts = ts
        self.last_request_ts = ts
        self.last_response_ts: float | None = None
        self.in_flight = 0  # requests at the end of the connection that were never answered
        self.cut_request_ts: float | None = None
        self.cut_request_frame: int | None = None
        self.cut_deadline: float | None = None
        self.named_id = 0  # the session id its last request named, if that was a full one (savings.request_kind)

    def seen(self, ts: float | None, response_ts: float | None, answered: bool, frame: int | None,
             max_wait_ms: int | None) -> None:
        if ts is not None:
            self.last_request_ts = ts
        if answered:
            self.in_flight = 0
            if response_ts is not None:
                self.last_response_ts = response_ts
            return
        if not self.in_flight:
            self.cut_request_ts, self.cut_request_frame = ts, frame
            self.cut_deadline = (ts or 0) + (max_wait_ms or 0) / 1000 + IN_FLIGHT_GRACE_S
        self.in_flight += 1


class ClosedConnection(NamedTuple):
    """What `broker_losses` reads of a connection that closed with nothing in flight."""

    order: int
    client_id: str | None
    first_ts: float
    last_response_ts: float


class ClosedConnections:
    """A broker's connections that closed answered, with nothing in flight, as the values `broker_losses` reads:
    28 bytes each in arrays (a storm of 100,000 connections), made into ClosedConnection rows only when two cut
    connections are judged. (One never answered tells nothing of the broker and is not kept.)"""

    __slots__ = ("order", "first_ts", "last_response_ts", "client", "_client_ids")

    def __init__(self) -> None:
        self.order, self.first_ts, self.last_response_ts = array("q"), array("d"), array("d")
        self.client = array("l")  # index into the client ids
        self._client_ids: dict[str | None, int] = {}

    def add(self, state: ConnectionState) -> None:
        if state.last_response_ts is None:
            return
        self.order.append(state.order)
        self.first_ts.append(state.first_ts)
        self.last_response_ts.append(state.last_response_ts)
        self.client.append(self._client_ids.setdefault(state.client_id, len(self._client_ids)))

    def rows(self) -> list[ClosedConnection]:
        ids = list(self._client_ids)
        return [ClosedConnection(o, ids[c], f, r)
                for o, c, f, r in zip(self.order, self.client, self.first_ts, self.last_response_ts)]


@dataclass(frozen=True, slots=True)
class BrokerLoss:
    """Every connection to ``broker`` cut at once: last answer at ``last_answer``, back at ``back`` (None: never
    in the capture); ``connections``: the cut ones."""

    broker: str
    last_answer: float
    cut_by: float
    back: float | None
    connections: tuple[ConnectionState, ...]

    @property
    def in_flight(self) -> int:
        return sum(c.in_flight for c in self.connections)

    @property
    def conns(self) -> frozenset[int]:
        return frozenset(c.conn for c in self.connections)


def broker_losses(broker: str, conns: list[ConnectionState], capture_end: float | None,
                  closed: ClosedConnections | None = None) -> list[BrokerLoss]:
    """The moments every live connection to ``broker`` was cut with requests in flight (at least two
    connections, from two clients or followed by the clients' return): a broker lost, not one client gone.
    ``conns``: the connections kept whole (open, or closed with requests in flight), ``closed``: the others."""
    if capture_end is None:
        return []
    everyone: list[ConnectionState | ClosedConnection] | None = None  # both, in order of first exchange
    cut = sorted((c for c in conns if c.in_flight and c.cut_deadline is not None and c.cut_deadline < capture_end),
                 key=_deadline)
    losses: list[BrokerLoss] = []
    group: list[ConnectionState] = []
    for c in [*cut, None]:
        if c is not None and group and _start(c) < min(_deadline(x) for x in group):
            group.append(c)
            continue
        if len(group) >= 2:
            if everyone is None:
                everyone = sorted([*conns, *(closed.rows() if closed else ())], key=_order)
            loss = _judge(broker, group, everyone)
            if loss is not None:
                losses.append(loss)
        group = [c] if c is not None else []
    return losses


def _order(c: ConnectionState | ClosedConnection) -> int:
    return c.order


def _deadline(c: ConnectionState) -> float:
    """When the connection's first unanswered request was due: only cut connections (chosen by it) are asked."""
    assert c.cut_deadline is not None, "a connection with a request in flight has its deadline"
    return c.cut_deadline


def _start(c: ConnectionState) -> float:
    """The broker last answered on this connection then: it was alive."""
    return c.last_response_ts if c.last_response_ts is not None else c.first_ts


def _judge(broker: str, group: list[ConnectionState], conns: list[ConnectionState | ClosedConnection]
           ) -> BrokerLoss | None:
    last_answer = max(_start(c) for c in group)
    cut_by = min(_deadline(c) for c in group)
    cut = {id(c) for c in group}
    for c in conns:
        if id(c) in cut or c.first_ts > last_answer or c.last_response_ts is None:
            continue
        # another connection open before the loss: answered after it, the broker lived on; answered before,
        # the broker was alive until then
        if c.last_response_ts > cut_by:
            return None
        last_answer = max(last_answer, c.last_response_ts)
    # the clients' new connections the broker answered: it was back by their first request
    later = [c for c in conns if c.first_ts > last_answer and c.last_response_ts is not None]
    back = min((c.first_ts for c in later), default=None)
    returned = {c.client_id for c in later} & {c.client_id for c in group}
    if len({c.client_id for c in group}) < 2 and not returned:
        return None
    return BrokerLoss(broker, last_answer, cut_by, back, tuple(group))

