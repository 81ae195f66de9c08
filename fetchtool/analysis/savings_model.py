"""What one client connection would have sent and received with a working fetch session.

A StreamModel follows one client connection to one broker. For each captured Fetch exchange it works out the
partitions the client wanted (the request's partitions; for a captured incremental request, the session so far
plus the changes), then asks the session engine what a session would carry:

- the request: fetchtool.sessions' FetchSessionHandler Builder, given the wanted partitions, says what to send
  (added or changed partitions) and what to forget;
- the response: a FetchManager over a private, never-evicting cache, fed the captured per-partition results
  (high watermark, log start offset, records size, errors, diverging epoch, preferred read replica), says which
  partitions an incremental response includes (kafka-fetch-sessions.md section 2.5).

No session rule is re-implemented here: the model only turns captured rows into engine inputs and engine
outputs into sizes (savings_size). Partitions the captured response does not mention did not change, so they
are fed to the engine with the values it last saw.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from typing import NamedTuple

from fetchtool.exchange import Exchange, RequestPartition, ResponsePartition
from fetchtool.sessions import (FetchManager, FetchSessionCache, FetchSessionHandler, PartitionData,
                                PartitionResult, TopicIdPartition)
from fetchtool.sessions.partitions import ZERO_UUID

from . import savings_size as size

MIN_SESSION_VERSION = 7  # KIP-227: Fetch v7 added sessions; older exchanges are estimated at v7

# What kind of request the client actually sent.
SESSIONLESS, FULL, INCREMENTAL, CLOSE = "sessionless", "full", "incremental", "close"
# Where an exchange's saving is booked.
REALISED, POTENTIAL, LOST = "realised", "potential", "lost"


class ByteSums:
    """Both directions added up; shared by one exchange's figures and the running totals."""

    __slots__ = ()

    @property
    def actual_bytes(self) -> int:
        return self.actual_request_bytes + self.actual_response_bytes

    @property
    def full_bytes(self) -> int:
        return self.full_request_bytes + self.full_response_bytes

    @property
    def incremental_bytes(self) -> int:
        return self.incremental_request_bytes + self.incremental_response_bytes

    @property
    def saved_bytes(self) -> int:
        return self.actual_bytes - self.incremental_bytes


@dataclass(frozen=True, slots=True)
class ExchangeSavings(ByteSums):
    """One Fetch exchange: its captured bytes and the bytes of its full and incremental equivalents.

    Response figures are 0 when the response was not captured (`response_missing`). `reencoded_*` is the
    captured exchange re-sized at its own version: equal to the captured bytes unless the wire carried
    something the decoded rows drop (e.g. unknown tagged fields).
    """

    file: str
    request_frame: int | None
    ts: float | None
    client: str
    client_id: str | None
    broker: str
    version: int
    equivalent_version: int
    kind: str            # sessionless | full | incremental | close (what the client sent)
    category: str        # realised | potential | lost
    cause: str | None    # for lost: "70", "71", "106", "cache_full", "churn", "session_start", "close", "other"
    error_code: int | None
    session_partitions: int
    incremental_sent: int
    incremental_forgotten: int
    incremental_returned: int
    actual_request_bytes: int
    actual_response_bytes: int
    full_request_bytes: int
    full_response_bytes: int
    incremental_request_bytes: int
    incremental_response_bytes: int
    records_bytes: int
    reencoded_request_bytes: int
    reencoded_response_bytes: int | None
    response_missing: bool
    # The parts of the actual and full frames that grow with the partition count (for the projection).
    actual_scalable_bytes: int
    full_scalable_bytes: int


    def to_json(self) -> dict:
        d = {k: getattr(self, k) for k in self.__slots__}
        d["saved_bytes"] = self.saved_bytes
        return d


def request_kind(ex: Exchange) -> str:
    epoch = ex.session_epoch
    if ex.api_version < MIN_SESSION_VERSION or epoch is None:
        return SESSIONLESS
    if epoch == -1:
        return CLOSE if ex.session_id else SESSIONLESS
    if epoch == 0:
        return FULL
    return INCREMENTAL


class ClientKey(NamedTuple):
    """The client's session key. Same equality as the engine's TopicPartition (topic, partition); a tuple so
    that hashing it, millions of times on a big capture, costs no Python call."""

    topic: str
    partition: int


class StreamModel:
    """The session a client connection could have had with one broker (per-connection state only)."""

    __slots__ = ("client", "broker", "handler", "manager", "wanted", "keys", "tips", "req_rows", "resp_rows", "noisy",
                 "last_results", "exchanges", "last_error", "full_since_incremental", "_full_req_cache")

    def __init__(self, client: str, broker: str) -> None:
        self.client, self.broker = client, broker
        self.handler = FetchSessionHandler(node_id=0)
        # A private cache: one slot per connection, never evicted, so the model session always works.
        self.manager = FetchManager(FetchSessionCache(max_slots=1, shards=1, eviction_ms=1 << 62,
                                                      rng=random.Random(0)))
        self.wanted: dict[ClientKey, PartitionData] = {}   # what the client fetches, in its order
        # (topic, topic id, partition) -> (client key, broker key); rows seen last, to reuse engine inputs
        self.keys: dict[tuple, tuple[ClientKey, TopicIdPartition]] = {}
        self.tips: dict[ClientKey, TopicIdPartition] = {}
        self.req_rows: dict[ClientKey, tuple[RequestPartition, PartitionData]] = {}
        self.resp_rows: dict[TopicIdPartition, ResponsePartition] = {}
        self.last_results: dict[TopicIdPartition, PartitionResult] = {}
        self.noisy: set[TopicIdPartition] = set()   # last results with records, errors, ...: not to be repeated
        self.exchanges = 0
        self.last_error = 0
        self.full_since_incremental = 0   # session-creating full fetches with no incremental one in between
        self._full_req_cache: tuple = ((), 0, -1)

    # -- captured rows -> engine inputs ---------------------------------------------------------------------
    def _key(self, topic: str | None, topic_id: str | None, partition: int, ids: bool
             ) -> tuple[ClientKey, TopicIdPartition]:
        k = (topic, topic_id if ids else None, partition)
        hit = self.keys.get(k)
        if hit is None:
            tid = uuid.UUID(topic_id) if ids and topic_id else ZERO_UUID
            # The client keys its session by name; a v13+ capture may only show the id.
            name = topic if topic is not None else (topic_id or "")
            hit = self.keys[k] = (ClientKey(name, partition), TopicIdPartition(tid, name, partition))
            self.tips.setdefault(hit[0], hit[1])
        return hit

    def _wanted(self, ex: Exchange, kind: str, ids: bool) -> dict[ClientKey, PartitionData]:
        wanted = dict(self.wanted) if kind == INCREMENTAL else {}
        req_rows = self.req_rows
        key = self._key
        for p in ex.request_partitions:
            tp, tip = key(p.topic, p.topic_id, p.partition, ids)
            last = req_rows.get(tp)
            if last is not None and last[0] == p:
                data = last[1]
            else:
                data = PartitionData(p.fetch_offset, p.log_start_offset, p.partition_max_bytes,
                                     p.current_leader_epoch, p.last_fetched_epoch, tip.topic_id)
                req_rows[tp] = (p, data)
            wanted[tp] = data
        if kind == INCREMENTAL:
            for f in ex.forgotten_partitions:
                wanted.pop(key(f.topic, f.topic_id, f.partition, ids)[0], None)
        elif kind == CLOSE:
            wanted = {}
        return wanted

    def _results(self, captured, ids: bool) -> dict[TopicIdPartition, ResponsePartition]:
        """Update the last seen per-partition results from the captured response; its rows by broker key."""
        rows: dict[TopicIdPartition, ResponsePartition] = {}
        if not captured:
            return rows
        resp_rows, last_results, keys, noisy = self.resp_rows, self.last_results, self.keys, self.noisy
        for r in captured:
            hit = keys.get((r.topic, r.topic_id, r.partition))
            tip = (hit or self._key(r.topic, r.topic_id, r.partition, ids))[1]
            rows[tip] = r
            if resp_rows.get(tip) != r:
                res = last_results[tip] = PartitionResult(r.error_code, r.high_watermark, r.last_stable_offset,
                                                          r.log_start_offset, r.records_bytes, r.diverging_epoch,
                                                          r.preferred_read_replica)
                resp_rows[tip] = r
                if r.records_bytes or r.error_code or r.diverging_epoch >= 0 or r.preferred_read_replica != -1:
                    noisy.add(tip)
        return rows

    def _broker_results(self, ctx, rows) -> dict[TopicIdPartition, PartitionResult]:
        """The engine's input for every partition the broker reads: captured where the response has it, else
        the last values seen, minus records, errors and the like (they were not repeated)."""
        last_results = self.last_results
        quiet = _QUIET   # never seen: equal to a new cached partition's state, so not included
        results = {tip: last_results.get(tip, quiet) for tip, _ in ctx.partitions()}
        noisy = self.noisy
        if noisy:
            for tip in [t for t in noisy if t not in rows]:
                noisy.discard(tip)
                res = last_results[tip]
                res = last_results[tip] = PartitionResult(0, res.high_watermark, res.last_stable_offset,
                                                          res.log_start_offset)
                self.resp_rows.pop(tip, None)
                if tip in results:
                    results[tip] = res
        return results

    # -- one exchange ------------------------------------------------------------------------------------------
    def feed(self, ex: Exchange) -> ExchangeSavings:
        kind = request_kind(ex)
        version = ex.api_version
        veq = max(version, MIN_SESSION_VERSION)
        ids = version >= 13
        wanted = self.wanted = self._wanted(ex, kind, ids)
        now_ms = int((ex.ts or 0.0) * 1000)

        # The client side: what a session would send.
        builder = self.handler.new_builder(copy_session_partitions=False)
        add = builder.add
        for tp, data in wanted.items():
            add(tp, data)
        req = builder.build()
        to_send = req.to_send
        forgotten = req.forgotten_for_version(veq)
        tips = self.tips
        fetch_data = {tips[tp]: data for tp, data in to_send.items()}
        names = {tip.topic_id: tip.topic for tip in fetch_data if tip.topic_id.int} if ids else {}
        ctx = self.manager.new_context(now_ms, veq, req.metadata, ex.replica_id is not None and ex.replica_id >= 0,
                                       fetch_data, forgotten, names)

        # The broker side: captured results for partitions the response mentions, the last seen values for
        # the others (they did not change, and bring no records).
        captured = ex.response_partitions
        rows = self._results(captured, ids)
        results = self._broker_results(ctx, rows)
        outcome = ctx.update_and_generate_response(now_ms, results)
        self.handler.handle_response(outcome.error_code, outcome.session_id, outcome.throttle_time_ms,
                                     [ClientKey(t.topic or "", t.partition) for t, _ in outcome.partitions],
                                     {t.topic_id for t, _ in outcome.partitions}, veq)
        return self._sizes(ex, kind, version, veq, wanted, to_send, forgotten, rows, outcome)

    def _sizes(self, ex: Exchange, kind: str, version: int, veq: int, wanted, to_send, forgotten, rows, outcome
               ) -> ExchangeSavings:
        client_id, replica_id, rack = ex.client_id, ex.replica_id, ex.rack_id
        ids = veq >= 13   # the wire key of a topic: its id from v13, else its name
        tips = self.tips
        if ids:
            inc_req = size.request_frame_size(veq, client_id, replica_id, rack,
                                              [tips[tp].topic_id for tp in to_send], [t.topic_id for t in forgotten])
        else:
            inc_req = size.request_frame_size(veq, client_id, replica_id, rack,
                                              [tp.topic for tp in to_send], [t.topic for t in forgotten])
        # The full request's size depends only on which partitions are wanted, in which order.
        order = list(wanted)
        cached_order, cached_size, cached_shape = self._full_req_cache
        shape = (veq, client_id, replica_id, rack)
        if cached_shape == shape and cached_order == order:
            full_req = cached_size
        else:
            full_req = size.request_frame_size(veq, client_id, replica_id, rack,
                                               [tips[tp].topic_id for tp in order] if ids else
                                               [tp.topic for tp in order])
            self._full_req_cache = (order, full_req, shape)
        if (version == veq and kind != INCREMENTAL and not ex.forgotten_partitions
                and len(ex.request_partitions) == len(order)):
            reenc_req = full_req      # a full request re-sizes as the full equivalent: same entries, same order
        else:
            reenc_req = size.request_frame_size(
                version, client_id, replica_id, rack, _keys(version, ex.request_partitions),
                _keys(version, ex.forgotten_partitions))
        captured = ex.response_partitions
        missing = captured is None
        records = 0
        if missing:
            inc_resp = full_resp = 0
            reenc_resp = None
        else:
            recs = [r.records_bytes for r in captured]
            records = sum(recs)
            aborted = [r.aborted_transactions for r in captured if r.aborted_transactions > 0]
            diverging = [r.diverging_epoch for r in captured if r.diverging_epoch >= 0]
            reenc_resp = size.response_frame_size(version, _keys(version, captured), recs, aborted, diverging)
            # Full: every wanted partition in request order (a full response follows the request), the ones
            # the captured response lacks as unchanged entries; then any it had beyond them.
            in_order = [tips[tp] for tp in order]
            if version != veq or len(rows) != len(captured) or list(rows) != in_order:
                full_rows = [rows.get(t) for t in in_order]
                seen = set(in_order)
                full_rows += [r for t, r in rows.items() if t not in seen]
                keys = [t.topic_id if ids else t.topic for t in in_order] + [
                    t.topic_id if ids else t.topic for t in rows if t not in seen]
                present = [r for r in full_rows if r is not None]
                full_resp = size.response_frame_size(veq, keys, [r.records_bytes for r in present],
                                                     [r.aborted_transactions for r in present],
                                                     [r.diverging_epoch for r in present])
            else:
                full_resp = reenc_resp
            keys, irecs, iab, idiv = [], [], [], []
            for tip, res in outcome.partitions:
                keys.append(tip.topic_id if ids else tip.topic)
                r = rows.get(tip)
                if r is None:
                    irecs.append(res.records_size)
                    idiv.append(res.diverging_epoch)
                else:
                    irecs.append(r.records_bytes)
                    iab.append(r.aborted_transactions)
                    idiv.append(r.diverging_epoch)
            inc_resp = size.response_frame_size(veq, keys, irecs, iab, idiv)
        actual_req = ex.request_bytes or 0
        actual_resp = 0 if missing else (ex.response_bytes or 0)
        # Bytes the decoded rows do not keep (e.g. tagged fields such as NodeEndpoints) would be on the wire in
        # either equivalent too: carry them over.
        if ex.request_bytes is not None:
            inc_req += actual_req - reenc_req
            full_req += actual_req - reenc_req
        if not missing and ex.response_bytes is not None:
            inc_resp += actual_resp - reenc_resp
            full_resp += actual_resp - reenc_resp

        # Bytes that grow with the partition count: everything but the empty frames and the records.
        full_scalable = full_req - size.empty_request_frame(veq, client_id, replica_id, rack)
        if not missing:
            full_scalable += full_resp - size.empty_response_frame(veq) - records
        actual_scalable = 0
        if kind != INCREMENTAL and ex.error_code in (0, None):
            actual_scalable = actual_req - size.empty_request_frame(version, client_id, replica_id, rack)
            if not missing:
                actual_scalable += actual_resp - size.empty_response_frame(version) - records
            actual_scalable = max(0, actual_scalable)

        category, cause = self._book(ex, kind)
        self.exchanges += 1
        return ExchangeSavings(
            ex.file, ex.request_frame, ex.ts, ex.client, ex.client_id, ex.broker, version, veq, kind, category, cause,
            ex.error_code, len(wanted), len(to_send), len(forgotten), len(outcome.partitions), actual_req,
            actual_resp, full_req, full_resp, inc_req, inc_resp, records, reenc_req, reenc_resp, missing,
            actual_scalable, full_scalable)

    def _book(self, ex: Exchange, kind: str) -> tuple[str, str | None]:
        """Realised (a working session), potential (no session at all) or lost (a session that failed)."""
        err = ex.error_code or 0
        first = self.exchanges == 0
        prev_error, self.last_error = self.last_error, err
        if kind == SESSIONLESS:
            return POTENTIAL, None
        if kind == INCREMENTAL:
            if err == 0:
                self.full_since_incremental = 0
                return REALISED, None
            return LOST, str(err)
        if kind == CLOSE:
            return LOST, "close"
        # A full request (epoch 0) from a session-capable client.
        if err:
            return LOST, str(err)
        if prev_error:
            return LOST, str(prev_error)      # re-creating the session after that error
        if ex.response_session_id == 0 and ex.response_partitions is not None:
            return LOST, "cache_full"         # the broker had no slot (or refused a session)
        self.full_since_incremental += 1
        if first or self.full_since_incremental == 1:
            return LOST, "session_start"
        return LOST, "churn"                  # a new session again without ever going incremental


_QUIET = PartitionResult()


def _keys(version: int, rows) -> list:
    """The wire topic key of each decoded row (name before v13, id string from v13)."""
    if version >= 13:
        return [r.topic_id for r in rows]
    return [r.topic for r in rows]
