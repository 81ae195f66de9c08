"""Client models: how a replayed client chooses each request's session metadata and partitions.

Sans-IO and shared by simulate (in memory) and replay (real sockets). A model takes a `PlannedFetch` (what the
client wanted) and returns a `FetchPlanRequest` (metadata, partitions to send, partitions to forget); it then
takes the broker's answer. Kafka's client session rules live in fetchtool.sessions.FetchSessionHandler; the
models only decide *whether* a client uses it, as the capture showed (or as --sessions overrides):

- SESSION: driven by FetchSessionHandler (full (0,0), then incremental (id, n), reset on errors).
- ALWAYS_NEW: (0,0) with every partition on every fetch, whatever the broker answered (Sarama #1644).
- SESSIONLESS: (0,-1) with every partition (librdkafka, aiokafka, Sarama today, any Fetch < v7).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fetchtool.replay.plan import ALWAYS_NEW, SESSION, SESSIONLESS, PlannedFetch
from fetchtool.sessions.client import FetchSessionHandler, topic_id_summary
from fetchtool.sessions.metadata import FetchMetadata
from fetchtool.sessions.partitions import PartitionData, TopicIdPartition, TopicPartition

# --sessions values
AS_CAPTURED = "as-captured"
ON = "on"
OFF = "off"
SESSION_MODES = (AS_CAPTURED, ON, OFF)


@dataclass(frozen=True, slots=True)
class FetchPlanRequest:
    metadata: FetchMetadata
    fetch_data: dict[TopicIdPartition, PartitionData]  # request order
    to_forget: list[TopicIdPartition]


def effective_behaviour(captured: str, mode: str, version: int) -> str:
    """The behaviour to drive: as captured, or forced by --sessions (Fetch < v7 has no session fields)."""
    if version < 7:
        return SESSIONLESS
    if mode == ON:
        return SESSION
    if mode == OFF:
        return SESSIONLESS
    return captured


class ClientModel:
    """One client's request choices towards one broker (its handler stands for the client's session with that
    broker; simulate gives one model to all of a client's linked connections, plan.link_reconnects)."""

    __slots__ = ("behaviour", "mode", "handler", "keys", "tps", "last_full", "interned", "_drives", "_wanted",
                 "_data", "_summary", "_order_free")

    def __init__(self, behaviour: str, mode: str = AS_CAPTURED,
                 interned: dict[tuple, tuple[TopicPartition, TopicIdPartition]] | None = None) -> None:
        self.behaviour = behaviour
        self.mode = mode
        self.handler = FetchSessionHandler(0)
        self.keys: dict[TopicPartition, TopicIdPartition] = {}  # client key -> broker key, learned as sent
        # The plan's key objects (ReplayPlan.keys): sending the same objects the plan's reads are keyed by lets
        # the broker's lookups hit identical keys.
        self.interned = interned if interned is not None else {}
        self.tps: dict[TopicIdPartition, TopicPartition] = {}
        self.last_full = True
        # effective_behaviour only depends on whether the version has session fields: the behaviour below v7
        # and from v7.
        self._drives = (effective_behaviour(behaviour, mode, 6), effective_behaviour(behaviour, mode, 7))
        # The last wanted tuple and what was derived from it. The plan reuses one tuple object while a client's
        # wanted set is unchanged, so a steady consumer derives its request maps once, not per fetch.
        self._wanted: tuple | None = None
        # keyed by TopicIdPartition for a full or sessionless client, by TopicPartition for the session handler
        self._data: dict[Any, PartitionData] = {}
        self._summary: tuple | None = None
        self._order_free = False   # whether ``_summary`` is the same for ``_data`` in any order

    def request(self, fetch: PlannedFetch) -> FetchPlanRequest:
        return FetchPlanRequest(*self.request_parts(fetch))

    def request_parts(self, fetch: PlannedFetch) -> tuple[FetchMetadata, dict[TopicIdPartition, PartitionData],
                                                          list[TopicIdPartition]]:
        """``request`` as a plain (metadata, fetch_data, to_forget) tuple (the simulation's hot path)."""
        version = fetch.version
        behaviour = self._drives[version >= 7]
        wanted = fetch.wanted
        if behaviour != SESSION:
            self.last_full = True
            if wanted is not self._wanted or self._summary is not None:
                # The broker keeps the dict (full and sessionless contexts) but never changes it, so an
                # unchanged wanted set can send the same one again.
                self._wanted, self._summary = wanted, None
                self._data = {w.key: w.data for w in wanted}
            return (FetchMetadata.INITIAL if behaviour == ALWAYS_NEW else FetchMetadata.LEGACY), self._data, []
        if fetch.epoch == -1 and self.mode == AS_CAPTURED:
            # The capture closed: Kafka's consumer closes whatever session its handler holds, (id, -1), or sends
            # (0, -1) when it holds none; the simulated handler may hold one the captured client did not.
            self.handler.notify_close()
        handler = self.handler
        if wanted is not self._wanted or self._summary is None:
            self._wanted = wanted
            pairs = {w.tp: w.data for w in wanted}
            # The same partitions in another order (the plan moves one a request re-sent unchanged to the end) have
            # the same summary, unless a topic id goes by two names (the first name wins).
            if not (self._order_free and self._summary is not None and pairs == self._data):
                self._summary = summary = topic_id_summary(pairs.items())
                names = summary[0]
                self._order_free = not names or len(names) == len(
                    {(d.topic_id, tp.topic) for tp, d in pairs.items() if d.topic_id.int})
            self._data = pairs
        md = handler.unchanged_request(self._data, self._summary)
        if md is not None:       # nothing to send or forget (most fetches of a steady consumer)
            self.last_full = False
            return md, {}, []
        # only to_send is read here, so the session map need not be copied
        built = handler.build_from(self._data, self._summary, copy_session_partitions=False)
        data = {}
        to_send = built.to_send
        if to_send:
            keys = self.keys
            for tp, pd in to_send.items():
                key = keys.get(tp)
                if key is None or key.topic_id.int != pd.topic_id.int:
                    pair = self.interned.get((tp.topic, tp.partition, pd.topic_id))
                    key = keys[tp] = pair[1] if pair is not None else TopicIdPartition(pd.topic_id, tp.topic,
                                                                                       tp.partition)
                data[key] = pd
        metadata = built.metadata
        self.last_full = metadata.is_full
        forget = built.to_forget
        if version >= 13 and built.to_replace:
            forget = forget + built.to_replace     # forgotten_for_version
        elif forget:
            forget = list(forget)
        return metadata, data, forget

    def response(self, version: int, error_code: int, session_id: int, throttle_time_ms: int,
                 partitions) -> None:
        """Give the client the broker's answer (only session-driven clients keep state).

        `partitions` are the response's (TopicIdPartition, ...) pairs."""
        if self._drives[version >= 7] != SESSION:
            return
        if partitions:
            tps = self.tps
            try:
                out = [tps[k] for k, _ in partitions]
            except KeyError:    # a partition first seen in a response
                for k, _ in partitions:
                    if k not in tps:
                        tps[k] = TopicPartition(k.topic or str(k.topic_id), k.partition)
                out = [tps[k] for k, _ in partitions]
            ids = {k.topic_id for k, _ in partitions if k.topic_id.int} if version >= 13 else set()
        else:
            out, ids = [], set()
        self.handler.handle_response(error_code, session_id, throttle_time_ms, out, ids, version)

    def error(self) -> None:
        """A request that got no answer (timeout, disconnect): the handler resets to (id, 0)."""
        if self.behaviour == SESSION or self.mode == ON:
            self.handler.handle_error()



def answer_reached_client(fetches: list[PlannedFetch], j: int) -> bool:
    """Whether the client got the answer to ``fetches[j]``, whose response the capture does not have.

    Kafka's client closes the connection on a request timeout, and a lost connection fails the fetch in flight
    (AbstractFetch.handleFetchFailure: the next request is (id, 0)). So an unanswered fetch that ends its
    connection failed. One the client followed on the same connection was answered and the capture missed the
    answer, unless the client's next request restarted its session with (id, 0) as after a failure.
    """
    if j + 1 >= len(fetches):
        return False
    after = fetches[j + 1]
    return not (after.epoch == 0 and after.session_id != 0)
