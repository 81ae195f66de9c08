"""The client side of KIP-227: Kafka's FetchSessionHandler (clients/.../FetchSessionHandler.java).

One handler per destination broker. ``new_builder()`` collects the partitions wanted next and ``build()`` turns
them into a full or incremental request against the handler's session; ``handle_response`` /
``handle_error`` / ``notify_close`` choose the metadata of the next request.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Iterable, TypeVar

from . import errors
from .errors import BuilderAlreadyBuilt
from .metadata import INVALID_SESSION_ID, FetchMetadata
from .partitions import PartitionData, TopicIdPartition, TopicPartition

LATEST_FETCH_VERSION = 17          # at the reference commit (Kafka 3.9/4.0); 4.x adds v18
MAX_VERSION_WITHOUT_TOPIC_IDS = 12

T = TypeVar("T")
_set = object.__setattr__


def max_request_version(can_use_topic_ids: bool, latest: int = LATEST_FETCH_VERSION) -> int:
    """The version cap AbstractFetch applies: latest if every partition has a topic id, else 12."""
    return latest if can_use_topic_ids else min(latest, MAX_VERSION_WITHOUT_TOPIC_IDS)


@dataclass(frozen=True)
class FetchRequestData:
    """What a built request carries. ``to_send`` is every partition for a full request; for an incremental one
    the added partitions followed by the altered or replaced ones."""

    to_send: dict[TopicPartition, PartitionData]
    to_forget: list[TopicIdPartition]
    to_replace: list[TopicIdPartition]
    session_partitions: dict[TopicPartition, PartitionData]
    metadata: FetchMetadata
    can_use_topic_ids: bool

    def __init__(self, to_send: dict[TopicPartition, PartitionData], to_forget: list[TopicIdPartition],
                 to_replace: list[TopicIdPartition], session_partitions: dict[TopicPartition, PartitionData],
                 metadata: FetchMetadata, can_use_topic_ids: bool) -> None:
        # One assignment of the instance dict instead of six frozen-field setters (a request is built per fetch).
        _set(self, "__dict__", {"to_send": to_send, "to_forget": to_forget, "to_replace": to_replace,
                                "session_partitions": session_partitions, "metadata": metadata,
                                "can_use_topic_ids": can_use_topic_ids})

    def forgotten_for_version(self, version: int) -> list[TopicIdPartition]:
        """ForgottenTopicsData: toForget, plus toReplace only from v13 (below it the new partition would be
        dropped with the old one, since both have the same name)."""
        if version >= 13:
            return list(self.to_forget) + list(self.to_replace)
        return list(self.to_forget)

    def max_version(self, latest: int = LATEST_FETCH_VERSION) -> int:
        return max_request_version(self.can_use_topic_ids, latest)

    def __str__(self) -> str:
        if self.metadata.is_full:
            body = "FullFetchRequest(toSend=(" + ", ".join(map(str, self.to_send)) + ")"
        else:
            implied = [tp for tp in self.session_partitions if tp not in self.to_send]
            body = ("IncrementalFetchRequest(toSend=(" + ", ".join(map(str, self.to_send))
                    + "), toForget=(" + ", ".join(map(str, self.to_forget))
                    + "), toReplace=(" + ", ".join(map(str, self.to_replace))
                    + "), implied=(" + ", ".join(map(str, implied)) + ")")
        return body + f", canUseTopicIds={self.can_use_topic_ids})"


def find_missing(to_find: Iterable[T], to_search: Iterable[T]) -> list[T]:
    """Items of ``to_find`` not in ``to_search``, in ``to_find`` order (Kafka returns a LinkedHashSet)."""
    search = to_search if isinstance(to_search, (set, frozenset, dict)) else set(to_search)
    if isinstance(to_find, (list, tuple, dict, set, frozenset)) and all(map(search.__contains__, to_find)):
        return []           # the usual answer, without building the seen set (and tested in C)
    out: list[T] = []
    seen: set = set()
    for item in to_find:
        if item not in search and item not in seen:
            seen.add(item)
            out.append(item)
    return out


def topic_id_summary(partitions: Iterable[tuple[TopicPartition, PartitionData]]) -> tuple[dict[uuid.UUID, str], int]:
    """What a Builder learns from ``add``-ing these partitions: the topic names by id (first name wins) and the
    number of partitions without a topic id. Lets a caller that sends the same set again reuse it (build_from)."""
    names: dict[uuid.UUID, str] = {}
    without = 0
    last = None        # partitions of one topic share its id object: skip the (Python-level) UUID hash for them
    last_zero = False
    for tp, data in partitions:
        tid = data.topic_id
        if tid is last:
            if last_zero:
                without += 1
            continue
        last = tid
        last_zero = tid.int == 0
        if last_zero:
            without += 1
        elif tid not in names:
            names[tid] = tp.topic
    return names, without


class Builder:
    """Collects the partitions the next request wants (``add``), then ``build()`` once."""

    def __init__(self, handler: FetchSessionHandler, copy_session_partitions: bool = True) -> None:
        self._handler = handler
        self._copy_session_partitions = copy_session_partitions
        # Insertion order matters: a full response is filled in this order, and build() relies on it.
        self._next: dict[TopicPartition, PartitionData] | None = {}
        self._topic_names: dict[uuid.UUID, str] = {}
        self._partitions_without_topic_ids = 0

    def add(self, tp: TopicPartition, data: PartitionData) -> None:
        if self._next is None:
            raise BuilderAlreadyBuilt("add() after build()")
        self._next[tp] = data
        if data.topic_id.int == 0:
            self._partitions_without_topic_ids += 1
        else:
            self._topic_names.setdefault(data.topic_id, tp.topic)

    def build(self) -> FetchRequestData:
        nxt = self._next
        if nxt is None:
            raise BuilderAlreadyBuilt("build() called twice on one FetchSessionHandler.Builder")
        self._next = None
        return _build(self._handler, nxt, self._topic_names, self._partitions_without_topic_ids,
                      self._copy_session_partitions)


def _build(h: FetchSessionHandler, nxt: dict[TopicPartition, PartitionData], topic_names: dict[uuid.UUID, str],
           partitions_without_topic_ids: int, copy_session_partitions: bool) -> FetchRequestData:
    """Builder.build(): ``nxt`` (the partitions added, in order; consumed) against the handler's session."""
    can_use_topic_ids = partitions_without_topic_ids == 0

    if h.next_metadata.is_full:
        h.session_partitions = nxt
        h.session_topic_names = topic_names if can_use_topic_ids else {}
        to_send = dict(nxt)
        return FetchRequestData(to_send, [], [], to_send, h.next_metadata, can_use_topic_ids)

    session = h.session_partitions
    if nxt == session:
        # Same partitions with equal data (dict equality tries identity first, so this is C-speed when the
        # caller reuses its PartitionData objects): the loop below would pop every entry of next, find nothing
        # altered, replaced, removed or added, and leave the session as it is.
        nxt.clear()
        h.session_topic_names = topic_names if can_use_topic_ids else {}
        session_view = dict(session) if copy_session_partitions else session
        return FetchRequestData(nxt, [], [], session_view, h.next_metadata, can_use_topic_ids)
    removed: list[TopicIdPartition] = []
    replaced: list[TopicIdPartition] = []
    for tp, prev in list(session.items()):
        new = nxt.pop(tp, None)
        if new is prev:
            continue    # the very same PartitionData object: unchanged (equality is reflexive)
        if new is not None:
            prev_id, new_id = prev.topic_id.int, new.topic_id.int
            if prev_id != new_id and prev_id != 0 and new_id != 0:
                # Same name, new id (topic recreated): send the new one, forget the old one (v13+).
                nxt[tp] = new
                session[tp] = new
                replaced.append(TopicIdPartition(prev.topic_id, tp.topic, tp.partition))
            elif prev != new:
                nxt[tp] = new                     # re-added at the end of next
                session[tp] = new
        else:
            del session[tp]
            removed.append(TopicIdPartition(prev.topic_id, tp.topic, tp.partition))
            if can_use_topic_ids and prev.topic_id.int == 0:
                can_use_topic_ids = False
    for tp, new in nxt.items():
        if tp in session:
            # Everything after this point was moved to the end of next by the loop above.
            break
        session[tp] = new
    h.session_topic_names = topic_names if can_use_topic_ids else {}
    session_view = dict(session) if copy_session_partitions else session
    return FetchRequestData(nxt, removed, replaced, session_view, h.next_metadata, can_use_topic_ids)


class FetchSessionHandler:
    """The fetch session state a client keeps for one broker."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.next_metadata: FetchMetadata = FetchMetadata.INITIAL
        self.session_partitions: dict[TopicPartition, PartitionData] = {}
        self.session_topic_names: dict[uuid.UUID, str] = {}
        # The INFO/DEBUG line Kafka would log for the last handled response or error, kept as (format, args)
        # and only formatted when read: a simulation handles far more responses than anyone reads lines of.
        self._message: tuple[str, tuple] | None = None

    @property
    def last_message(self) -> str | None:
        msg = self._message
        return None if msg is None else msg[0].format(*msg[1])

    def new_builder(self, copy_session_partitions: bool = True) -> Builder:
        return Builder(self, copy_session_partitions)

    def build_from(self, partitions: dict[TopicPartition, PartitionData],
                   summary: tuple[dict[uuid.UUID, str], int] | None = None,
                   copy_session_partitions: bool = True) -> FetchRequestData:
        """``new_builder()``, ``add`` of every (partition, data) in order, then ``build()``, in one call.

        ``summary`` is topic_id_summary(partitions.items()) when the caller already has it; the dict
        ``partitions`` is copied, never kept or changed.
        """
        names, without = summary if summary is not None else topic_id_summary(partitions.items())
        md = self.unchanged_request(partitions, (names, without))
        if md is not None:
            session = self.session_partitions
            return FetchRequestData({}, [], [], dict(session) if copy_session_partitions else session, md,
                                    without == 0)
        return _build(self, dict(partitions), dict(names), without, copy_session_partitions)

    def unchanged_request(self, partitions: dict[TopicPartition, PartitionData],
                          summary: tuple[dict[uuid.UUID, str], int]) -> FetchMetadata | None:
        """``build_from(partitions, summary)`` when it is an incremental request that sends, forgets and replaces
        nothing (its metadata; the session kept as it is), else None and nothing changed. What _build's unchanged
        case gives, without copying the caller's partitions or making the request (a simulation's steady fetch)."""
        md = self.next_metadata
        if md.epoch == 0 or md.epoch == -1 or partitions != self.session_partitions:
            return None
        names, without = summary
        if without:
            self.session_topic_names = {}
        elif names != self.session_topic_names:
            self.session_topic_names = dict(names)
        return md

    # ------------------------------------------------------------------------------------- responses
    def resolve_response_partitions(self, topics: Iterable[tuple[str | None, uuid.UUID, Iterable[int]]],
                                    version: int) -> list[TopicPartition]:
        """FetchResponse.responseData(sessionTopicNames, version): names as sent for v<13; for v13+ the topic
        id is resolved through the session's names and topics with unknown ids are dropped."""
        out: list[TopicPartition] = []
        for name, topic_id, parts in topics:
            if version >= 13:
                name = self.session_topic_names.get(topic_id)
            if name is not None:
                out.extend(TopicPartition(name, p) for p in parts)
        return out

    def verify_full_fetch_response_partitions(self, partitions: Iterable[TopicPartition], ids: Iterable[uuid.UUID],
                                              version: int) -> str | None:
        """None if a full response has exactly the session's partitions (and, v13+, only known ids)."""
        partitions = list(partitions)
        pset = set(partitions)
        extra = find_missing(partitions, self.session_partitions)
        omitted = find_missing(self.session_partitions, pset)
        extra_ids = find_missing(ids, self.session_topic_names) if version >= 13 else []
        if not (extra or omitted or extra_ids):
            return None
        bld = ""
        if omitted:
            bld += "omittedPartitions=(" + ", ".join(map(str, omitted)) + "), "
        if extra:
            bld += "extraPartitions=(" + ", ".join(map(str, extra)) + "), "
        if extra_ids:
            bld += "extraIds=(" + ", ".join(map(str, extra_ids)) + "), "
        return bld + "response=(" + ", ".join(map(str, partitions)) + ")"

    def verify_incremental_fetch_response_partitions(self, partitions: Iterable[TopicPartition],
                                                     ids: Iterable[uuid.UUID], version: int) -> str | None:
        """None if every partition of an incremental response is in the session (and, v13+, every id known)."""
        partitions = list(partitions)
        extra_ids = find_missing(ids, self.session_topic_names) if version >= 13 else []
        extra = find_missing(partitions, self.session_partitions)
        if not (extra or extra_ids):
            return None
        bld = ""
        if extra:
            bld += "extraPartitions=(" + ", ".join(map(str, extra)) + "), "
        if extra_ids:
            bld += "extraIds=(" + ", ".join(map(str, extra_ids)) + "), "
        return bld + "response=(" + ", ".join(map(str, partitions)) + ")"

    def handle_response(self, error_code: int, session_id: int, throttle_time_ms: int,
                        response_partitions: list[TopicPartition], response_topic_ids: set[uuid.UUID],
                        version: int) -> bool:
        """Whether the response is usable; sets the next request's metadata (spec §3.3).

        ``response_partitions`` are the response's partitions as FetchResponse.responseData(sessionTopicNames,
        version) yields them (see resolve_response_partitions); ``response_topic_ids`` every topic id in it.
        """
        md = self.next_metadata
        if error_code != errors.NONE:
            self._message = ("Node {} was unable to process the fetch request with {}: {}.",
                             (self.node_id, md, errors.error_name(error_code)))
            if error_code == errors.FETCH_SESSION_ID_NOT_FOUND:
                self.next_metadata = FetchMetadata.INITIAL
            else:
                self.next_metadata = md.next_close_existing_attempt_new()
            return False
        if md.epoch == 0 or md.epoch == -1:     # md.is_full
            if not response_partitions and throttle_time_ms > 0:
                # KIP-219: an empty full response that only says "throttled" cannot be processed.
                self._message = ("Node {} sent a empty full fetch response to indicate that this client should be "
                                 "throttled for {} ms.", (self.node_id, throttle_time_ms))
                self.next_metadata = FetchMetadata.INITIAL
                return False
            problem = self.verify_full_fetch_response_partitions(response_partitions, response_topic_ids, version)
            if problem is not None:
                self._message = ("Node {} sent an invalid full fetch response with {}", (self.node_id, problem))
                self.next_metadata = FetchMetadata.INITIAL
                return False
            if session_id == INVALID_SESSION_ID:
                self._message = ("Node {} sent a full fetch response", (self.node_id,))
                self.next_metadata = FetchMetadata.INITIAL
                return True
            self._message = ("Node {} sent a full fetch response that created a new incremental fetch session {}",
                             (self.node_id, session_id))
            self.next_metadata = FetchMetadata.new_incremental(session_id)
            return True
        session = self.session_partitions
        names = self.session_topic_names
        if (all(map(session.__contains__, response_partitions))
                and (version < 13 or all(map(names.__contains__, response_topic_ids)))):
            problem = None      # what verify_incremental_fetch_response_partitions says, without building lists
        else:
            problem = self.verify_incremental_fetch_response_partitions(response_partitions, response_topic_ids,
                                                                        version)
        if problem is not None:
            self._message = ("Node {} sent an invalid incremental fetch response with {}", (self.node_id, problem))
            self.next_metadata = md.next_close_existing_attempt_new()
            return False
        if session_id == INVALID_SESSION_ID:
            self._message = ("Node {} sent an incremental fetch response closing session {}",
                             (self.node_id, md.session_id))
            self.next_metadata = FetchMetadata.INITIAL
            return True
        self._message = ("Node {} sent an incremental fetch response with throttleTimeMs = {} for session {}",
                         (self.node_id, throttle_time_ms, session_id))
        self.next_metadata = md.next_incremental()
        return True

    def handle_error(self) -> None:
        """A network error, timeout or disconnect: close the session on the next request and try a new one."""
        self._message = ("Error sending fetch request {} to node {}:", (self.next_metadata, self.node_id))
        self.next_metadata = self.next_metadata.next_close_existing_attempt_new()

    def notify_close(self) -> None:
        """The consumer is closing: the next (final) request is (id, FINAL_EPOCH)."""
        self.next_metadata = self.next_metadata.next_close_existing()
