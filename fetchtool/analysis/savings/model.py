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

import operator
import random
from dataclasses import dataclass
from functools import lru_cache
from itertools import compress, groupby
from operator import attrgetter, eq, itemgetter, ne
from typing import TypeGuard, cast

from fetchtool._fast import fast_constructor
from fetchtool.exchange import Exchange, ResponsePartition
from fetchtool.sessions import (FetchManager, FetchSessionCache, FetchSessionHandler, PartitionData,
                                PartitionResult, TopicIdPartition, TopicPartition)
from fetchtool.sessions.partitions import ZERO_UUID

from fetchtool.analysis.model import closes_a_session
from fetchtool.analysis.savings import sizes as size
from fetchtool.analysis.savings.state import (QUIET, ClientKey, EngineKey, KeyDirectory, PartitionState, RequestState,
                                              partition_data, result, result_from_row)

MIN_SESSION_VERSION = 7  # KIP-227: Fetch v7 added sessions; older exchanges are estimated at v7

# What kind of request the client actually sent.
SESSIONLESS, FULL, INCREMENTAL, CLOSE = "sessionless", "full", "incremental", "close"
# Where an exchange's saving is booked.
REALISED, POTENTIAL, LOST = "realised", "potential", "lost"
REFUSED = "refused"  # a session-creating fetch answered with session id 0

# A key entry: what a captured row's (topic, topic id, partition) stands for.
_Entry = tuple[ClientKey, EngineKey, PartitionState, RequestState]

# Row and state fields read in C-level passes (map) rather than per-row Python code.
_row_key = itemgetter(0, 1, 2)           # (topic, topic id, partition) of a captured row
_row_topic = itemgetter(0)
_row_topic_id = itemgetter(1)
_row_partition = itemgetter(2)
_hit_ck = itemgetter(0)
_hit_part = itemgetter(2)
_hit_request = itemgetter(3)
_request_row = attrgetter("row")
_request_data = attrgetter("data")
_resp_row = attrgetter("resp_row")
_first = itemgetter(0)
_second = itemgetter(1)
_state_result = attrgetter("result")
_ck = attrgetter("ck")
_topic = attrgetter("topic")
_topic_id = attrgetter("topic_id")
_records_size = attrgetter("records_size")
_diverging_epoch = attrgetter("diverging_epoch")
_records_bytes = attrgetter("records_bytes")
_aborted = attrgetter("aborted_transactions")


class ByteSums:
    """Both directions added up; shared by one exchange's figures and the running totals."""

    __slots__ = ()
    # provided by each subclass (a dataclass field, or a slot of the running totals)
    actual_request_bytes: int
    actual_response_bytes: int
    full_request_bytes: int
    full_response_bytes: int
    incremental_request_bytes: int
    incremental_response_bytes: int

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
    cause: str | None    # for lost: "70", "71", "106", "refused", "churn", "session_start", "close", "other"
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
    # The parts of the actual, full and incremental frames that grow with the partition count (for the
    # projection): the bytes of full fetches (every partition) beyond their empty frames and records.
    actual_scalable_bytes: int
    full_scalable_bytes: int
    incremental_scalable_bytes: int

    def to_json(self) -> dict:
        d = {k: getattr(self, k) for k in self.__slots__}
        d["saved_bytes"] = self.saved_bytes
        return d


_new_savings = fast_constructor(ExchangeSavings)  # one per Fetch exchange (fetchtool._fast)


# A model of at most this many exchanges, carrying at most this many partition rows in all, can be kept as them
# (see StreamModel.fed, Replay): a small model, whose own objects outnumber its exchanges' (a bigger one keeps a
# row per partition, where its exchanges may hold several).
REPLAYABLE, REPLAYABLE_ROWS = 4, 64


class Replay:
    """A closed connection's model kept as the exchanges it was fed (StreamModel.fed): a few objects instead of the
    model's hundred, which a session storm's 100,000 connections would otherwise each leave behind (then free, long
    after, from cold memory). ``model()`` makes it again: the same exchanges, in order, to a new model."""

    __slots__ = ("client", "broker", "fed")

    def __init__(self, model: StreamModel) -> None:
        assert model.fed is not None
        self.client, self.broker, self.fed = model.client, model.broker, model.fed

    def model(self, rng: random.Random | None, directory: KeyDirectory | None) -> StreamModel:
        made = StreamModel(self.client, self.broker, rng, directory)
        for ex in self.fed:
            made.feed(ex)    # (its figures were counted the first time)
        return made


def request_kind(ex: Exchange, named_before: int) -> str:
    """What the request asks of the broker's sessions. ``named_before``: the session id the connection's previous
    request named if that was a full request (epoch 0 or -1), else 0 (analysis.model.closes_a_session)."""
    epoch = ex.session_epoch
    if ex.api_version < MIN_SESSION_VERSION or epoch is None:
        return SESSIONLESS
    if epoch == -1:
        return CLOSE if closes_a_session(ex.session_id, epoch, named_before) else SESSIONLESS
    if epoch == 0:
        return FULL
    return INCREMENTAL


def _complete(hits: list[_Entry | None]) -> TypeGuard[list[_Entry]]:
    """Whether every row found its key entry (an entry is a non-empty tuple, so truthy)."""
    return all(hits)


def _count_diverging(epochs: list[int]) -> int:
    return len([d for d in epochs if d >= 0]) if epochs and max(epochs) >= 0 else 0


class StreamModel:
    """The session a client connection could have had with one broker (per-connection state only)."""

    __slots__ = ("client", "broker", "handler", "manager", "wanted", "keys", "tips", "requests", "parts",
                 "noisy", "exchanges", "last_error", "full_since_incremental", "_full_cache", "simple", "any_ids",
                 "id_keys", "by_name", "_req_runs", "_resp_runs", "directory", "part_of", "fed", "fed_rows", "continued",
                 "named_id")

    def __init__(self, client: str, broker: str, rng: random.Random | None = None,
                 directory: KeyDirectory | None = None) -> None:
        """``rng``: where the private cache draws its session ids (the estimator's, shared by its models: the id
        is never part of a size, and seeding a generator per connection was a storm's cost). ``directory``: the
        partition keys shared with the estimator's other models."""
        self.client, self.broker = client, broker
        self.directory = directory if directory is not None else KeyDirectory()
        self.handler = FetchSessionHandler(node_id=0)
        # A private cache: one slot per connection, never evicted, so the model session always works.
        # (its creations are never read: not recorded)
        self.manager = FetchManager(FetchSessionCache(max_slots=1, shards=1, eviction_ms=1 << 62,
                                                      rng=rng or random.Random(0), record_events=False))
        self.wanted: dict[ClientKey, PartitionData] = {}   # what the client fetches, in its order
        # (topic, topic id, partition) of a captured row -> (client key, engine key, its state, its request)
        self.keys: dict[tuple, _Entry] = {}
        # the engine key a client key is sent as (its first); the engine hands client keys back as TopicPartitions
        self.tips: dict[ClientKey | TopicPartition, EngineKey] = {}
        self.requests: dict[ClientKey, RequestState] = {}
        self.parts: dict[TopicIdPartition, PartitionState] = {}
        # id(engine key) -> its state, for the engine keys of `keys` (alive while the model is): the engine hands
        # back the keys it was given, and these are shared by the models (KeyDirectory)
        self.part_of: dict[int, PartitionState] = {}
        self.noisy: list[PartitionState] = []
        self.exchanges = 0
        # the exchanges fed, while there are at most REPLAYABLE (then None): a closed connection's model is then
        # kept as these alone (Replay), and made again from them if a later connection continues its session
        self.fed: list[Exchange] | None = []
        self.fed_rows = 0
        self.continued = False   # a later connection continued its session (SavingsEstimator)
        self.last_error = 0
        self.full_since_incremental = 0   # session-creating full fetches with no incremental one in between
        self.named_id = 0   # the session id the connection's last request named, if it was a full one (request_kind)
        # (wanted order, shape, full request size, full response topic-entry size) of the last full equivalent
        self._full_cache: tuple = ((), None, 0, 0)
        # True while client keys and engine keys correspond one to one (always, unless a v13+ capture shows a
        # topic both by name and by id only, or a name with two ids): then sizes can be summed per partition.
        self.simple = True
        self.any_ids = False   # some engine key has a topic id
        self.id_keys = False   # some entry of `keys` has a topic id
        # The entries without a topic id again, by topic then partition: rows are looked up a topic at a time
        # (the wire lists a topic's partitions together), and the topic runs found size the captured frames.
        self.by_name: dict[str | None, dict[int, tuple]] = {}
        self._req_runs: list | None = None    # topic_runs of this exchange's request rows, when known
        self._resp_runs: list | None = None   # ... and of its response rows

    def __getstate__(self) -> dict:
        # (part_of is keyed by object ids, which do not survive a pickle: made again from `keys` on loading)
        return {name: getattr(self, name) for name in self.__slots__ if name != "part_of" and hasattr(self, name)}

    def __setstate__(self, state: dict) -> None:
        for name, value in state.items():
            setattr(self, name, value)
        self.part_of = {id(tip): part for _, tip, part, _ in self.keys.values()}

    # -- captured rows -> engine inputs ---------------------------------------------------------------------
    def _key(self, topic: str | None, topic_id: str | None, partition: int, ids: bool
             ) -> _Entry:
        k = (topic, topic_id if ids else None, partition)
        hit = self.keys.get(k)
        if hit is None:
            k, ck, tip = self.directory.keys_of(k, topic, topic_id, partition, ids)
            part = self.parts.get(tip)
            if part is None:
                part = self.parts[tip] = PartitionState(ck)
                if ck in self.tips:
                    self.simple = False   # this client key already stands for another engine key
            elif part.ck != ck:
                self.simple = False       # this engine key already has another client key
            self.part_of[id(tip)] = part
            if tip.topic_id.int:
                self.any_ids = True
            if k[1] is not None:
                self.id_keys = True
            request = self.requests.get(ck)
            if request is None:
                request = self.requests[ck] = RequestState()
            hit = self.keys[k] = (ck, tip, part, request)
            if k[1] is None:
                by_partition = self.by_name.get(topic)
                if by_partition is None:
                    by_partition = self.by_name[topic] = {}
                by_partition[partition] = hit
            self.tips.setdefault(ck, hit[1])
        return hit

    def _hits(self, rows, ids: bool, request: bool) -> tuple[list[_Entry], list | None]:
        """The key entry of each captured row, made where missing, in row order; and the rows' topic runs
        (topic_runs of their wire keys) when known. A row's own (topic, topic id, partition) is its entry's
        dict key, except that a request row's topic id is ignored below v13."""
        keys, key = self.keys, self._key
        runs: list[tuple[str, int]] | None = None
        hits: list[_Entry | None]
        if not ids and not self.id_keys:
            # Every entry is (topic, None, partition), and so is every row's below v13 (a topic id on a row can
            # find nothing): look the partitions up a topic at a time.
            by_name, runs, hits = self.by_name, [], []
            for topic, group in groupby(rows, _row_topic):
                run = list(group)
                runs.append((topic, len(run)))
                by_partition = by_name.get(topic)
                hits += map(by_partition.get, map(_row_partition, run)) if by_partition else [None] * len(run)
        else:
            hits = list(map(keys.get, map(_row_key, rows)))
            # (a row's topic id can only find a wrong entry if some entry has one)
            if request and not ids and self.id_keys and list(map(_row_topic_id, rows)).count(None) != len(rows):
                return [key(r.topic, r.topic_id, r.partition, ids) for r in rows], None
        if _complete(hits):
            return hits, runs
        # In order, as one at a time: a missing entry is made once, and later rows find it.
        return [h if h is not None else key(r.topic, r.topic_id, r.partition, ids) for h, r in zip(hits, rows)], runs

    def _wanted(self, ex: Exchange, kind: str, ids: bool) -> dict[ClientKey, PartitionData]:
        wanted = dict(self.wanted) if kind == INCREMENTAL else {}
        rows = ex.request_partitions
        hits, self._req_runs = self._hits(rows, ids, True)
        cks = list(map(_hit_ck, hits))
        requests = list(map(_hit_request, hits))
        make = partition_data
        if len(set(requests)) == len(requests):
            # Rows equal to the client key's last one reuse its engine input; the others get a new one.
            datas = list(map(_request_data, requests))
            same = list(map(eq, map(_request_row, requests), rows))
            if not all(same):
                for i in compress(range(len(rows)), map(operator.not_, same)):
                    p, q = rows[i], requests[i]
                    datas[i] = q.data = make(p.fetch_offset, p.log_start_offset, p.partition_max_bytes,
                                             p.current_leader_epoch, p.last_fetched_epoch, hits[i][1].topic_id)
                    q.row = p
            wanted.update(zip(cks, datas))
        else:   # a partition listed twice: row by row, each compared with the one before
            for p, tp, hit in zip(rows, cks, hits):
                q = hit[3]
                data = q.data
                if q.row != p or data is None:   # (no data yet: no row yet either)
                    data = q.data = make(p.fetch_offset, p.log_start_offset, p.partition_max_bytes,
                                         p.current_leader_epoch, p.last_fetched_epoch, hit[1].topic_id)
                    q.row = p
                wanted[tp] = data
        if kind == INCREMENTAL:
            key = self._key
            for f in ex.forgotten_partitions:
                wanted.pop(key(f.topic, f.topic_id, f.partition, ids)[0], None)
        elif kind == CLOSE:
            wanted = {}
        return wanted

    def _results(self, captured, ids: bool) -> tuple[list, list[PartitionState], list[ResponsePartition]]:
        """Update the last seen per-partition results from the captured response. Returns the key entry of
        each row, and the partitions it mentions, each once in order, with their (last) rows."""
        self._resp_runs = None
        if not captured:
            return [], [], []
        hits, self._resp_runs = self._hits(captured, ids, False)
        parts = list(map(_hit_part, hits))
        rows = captured
        if len(set(parts)) != len(parts):   # a partition repeated: its last row counts
            last = dict(zip(parts, captured))
            parts, rows = list(last), list(last.values())
        noisy, make = self.noisy, result_from_row
        for part, r in compress(zip(parts, rows), map(ne, map(_resp_row, parts), rows)):
            part.result = make(r)
            part.resp_row = r
            if (r.records_bytes or r.error_code or r.diverging_epoch >= 0 or r.preferred_read_replica != -1
                    ) and not part.noisy:
                part.noisy = True
                noisy.append(part)
        return hits, parts, rows

    def _broker_results(self, ctx, mentioned: list[PartitionState]) -> dict[TopicIdPartition, PartitionResult]:
        """The engine's input for every partition the broker reads: captured where the response has it, else
        the last values seen, minus records, errors and the like (they were not repeated)."""
        if self.noisy:
            now = set(mentioned)
            still = []
            for part in self.noisy:
                if part in now:
                    still.append(part)
                    continue
                part.noisy = False
                res = part.result
                part.result = result(0, res.high_watermark, res.last_stable_offset, res.log_start_offset, 0, -1, -1)
                part.resp_row = None
            self.noisy = still
        pairs = ctx.partitions()
        try:
            tips = list(map(_first, pairs))
            return dict(zip(tips, map(_state_result, map(self.part_of.__getitem__, map(id, tips)))))
        except KeyError:   # a key the engine made itself (not one of ours): find its state by equality
            parts = self.parts
            return {tip: (parts[tip].result if tip in parts else QUIET) for tip, _ in pairs}

    # -- one exchange ------------------------------------------------------------------------------------------
    def feed(self, ex: Exchange) -> ExchangeSavings:
        fed = self.fed
        if fed is not None:
            rows = len(ex.request_partitions) + len(ex.response_partitions or ())
            if len(fed) < REPLAYABLE and self.fed_rows + rows <= REPLAYABLE_ROWS:
                fed.append(ex)
                self.fed_rows += rows
            else:
                self.fed = None
        kind = request_kind(ex, self.named_id)
        self.named_id = (ex.session_id or 0) if kind != INCREMENTAL else 0
        version = ex.api_version
        veq = max(version, MIN_SESSION_VERSION)
        ids = version >= 13
        wanted = self.wanted = self._wanted(ex, kind, ids)
        now_ms = int((ex.ts or 0.0) * 1000)

        # The client side: what a session would send.
        # (with no topic id anywhere, what a Builder learns from the partitions is known: no names, none with an id)
        # (a ClientKey is the engine's TopicPartition in all but name: a (topic, partition) tuple, equal and
        # hashed alike)
        req = self.handler.build_from(cast("dict[TopicPartition, PartitionData]", wanted),
                                      None if self.any_ids else ({}, len(wanted)), copy_session_partitions=False)
        to_send = req.to_send
        forgotten = req.forgotten_for_version(veq)
        tips = self.tips
        fetch_data: dict[TopicIdPartition, PartitionData] = {tips[tp]: data for tp, data in to_send.items()}
        # (every engine key made here has a name, the topic id's text when the capture shows no name)
        names = {tip.topic_id: tip.topic for tip in fetch_data
                 if tip.topic_id.int and tip.topic is not None} if ids else {}
        ctx = self.manager.new_context(now_ms, veq, req.metadata, ex.replica_id is not None and ex.replica_id >= 0,
                                       fetch_data, forgotten, names)

        # The broker side: captured results for partitions the response mentions, the last seen values for
        # the others (they did not change, and bring no records).
        captured = ex.response_partitions
        hits, mentioned, mrows = self._results(captured, ids)
        results = self._broker_results(ctx, mentioned)
        outcome = ctx.update_and_generate_response(now_ms, results)
        parts = outcome.partitions
        out_keys = list(map(_first, parts))
        try:
            cks = list(map(_ck, out_keys))
        except AttributeError:
            cks = [ClientKey(t.topic or "", t.partition) for t in out_keys]
        if self.any_ids:
            topic_ids = set(map(_topic_id, out_keys))
        else:   # every key's id is the zero id
            topic_ids = {ZERO_UUID} if parts else set()
        self.handler.handle_response(outcome.error_code, outcome.session_id, outcome.throttle_time_ms, cks,
                                     topic_ids, veq)
        return self._sizes(ex, kind, version, veq, wanted, to_send, forgotten, (hits, mentioned, mrows), outcome,
                           out_keys, ctx.kind != "error" and self.simple, req.metadata.is_full)

    def _sizes(self, ex: Exchange, kind: str, version: int, veq: int, wanted, to_send, forgotten, seen, outcome,
               out_keys, simple: bool, equivalent_full: bool) -> ExchangeSavings:
        client_id, replica_id, rack = ex.client_id, ex.replica_id, ex.rack_id
        ids = veq >= 13   # the wire key of a topic: its id from v13, else its name
        tips = self.tips
        # The full request's size, and its response's topic entries, depend only on which partitions are wanted,
        # in which order.
        order = list(wanted)
        shape = (veq, client_id, replica_id, rack)
        cached_order, cached_shape, full_req, full_topics = self._full_cache
        if cached_shape != shape or cached_order != order:
            if ids or len(order) > _FULL_MEMO_KEYS:
                full_req, full_topics = _full_sizes(shape, [tips[tp].topic_id for tp in order] if ids
                                                    else [tp.topic for tp in order])
            else:
                full_req, full_topics = _full_sizes_by_name(shape, tuple(order))
            self._full_cache = (order, shape, full_req, full_topics)
        if not forgotten and len(to_send) == len(order) and list(to_send) == order:
            inc_req = full_req    # the session sends every wanted partition, in order: the full request's entries
        elif not to_send and not forgotten:
            inc_req = size.empty_request_frame(veq, client_id, replica_id, rack)   # (an idle session's request)
        elif ids:
            inc_req = size.request_frame_size(veq, client_id, replica_id, rack,
                                              [tips[tp].topic_id for tp in to_send], [t.topic_id for t in forgotten])
        else:
            inc_req = size.request_frame_size(veq, client_id, replica_id, rack,
                                              [tp.topic for tp in to_send], [t.topic for t in forgotten])
        if (version == veq and kind != INCREMENTAL and not ex.forgotten_partitions
                and len(ex.request_partitions) == len(order)):
            reenc_req = full_req      # a full request re-sizes as the full equivalent: same entries, same order
        elif not ex.request_partitions and not ex.forgotten_partitions:
            reenc_req = size.empty_request_frame(version, client_id, replica_id, rack)
        else:
            runs = self._req_runs   # the request rows' topic runs if _wanted found them (below v13 only)
            reenc_req = size.request_frame_size(
                version, client_id, replica_id, rack, () if runs is not None else _keys(version, ex.request_partitions),
                _keys(version, ex.forgotten_partitions), runs)
        captured = ex.response_partitions
        missing = captured is None
        records = 0
        if captured is None:
            inc_resp = full_resp = 0
            reenc_resp = None
        else:
            if captured:
                recs = list(map(_records_bytes, captured))
                records = sum(recs)
                # (the max() pass, in C, skips building the lists in the usual case: none)
                aborted = ([a for a in map(_aborted, captured) if a > 0]
                           if max(map(_aborted, captured), default=0) > 0 else [])
                diverging = ([d for d in map(_diverging_epoch, captured) if d >= 0]
                             if max(map(_diverging_epoch, captured), default=-1) >= 0 else [])
                runs = self._resp_runs
                reenc_resp = size.response_frame_size(version, () if runs is not None else _keys(version, captured),
                                                      recs, aborted, diverging, runs)
            else:   # nothing changed (an idle session's answer): the empty response
                recs, aborted, diverging = [], [], []
                reenc_resp = size.empty_response_frame(version)
            if simple and all(map(wanted.__contains__, map(_ck, seen[1]))):
                full_resp, inc_resp = self._response_sizes(version, veq, captured, seen, order, outcome,
                                                           out_keys, full_topics, reenc_resp, recs, aborted,
                                                           diverging)
            else:
                full_resp, inc_resp = self._response_sizes_any(version, veq, captured, seen, order, outcome,
                                                               reenc_resp)
        actual_req = ex.request_bytes or 0
        actual_resp = 0 if missing else (ex.response_bytes or 0)
        # Bytes the decoded rows do not keep (e.g. tagged fields such as NodeEndpoints) would be on the wire in
        # either equivalent too: carry them over.
        if ex.request_bytes is not None:
            inc_req += actual_req - reenc_req
            full_req += actual_req - reenc_req
        if reenc_resp is not None and ex.response_bytes is not None:   # (reenc_resp: None only when missing)
            inc_resp += actual_resp - reenc_resp
            full_resp += actual_resp - reenc_resp

        # Bytes that grow with the partition count: everything but the empty frames and the records.
        empty = (size.empty_request_frame(veq, client_id, replica_id, rack), size.empty_response_frame(veq))
        full_scalable = _scalable(full_req, full_resp, empty, records, missing)
        actual_scalable = 0
        if kind != INCREMENTAL and ex.error_code in (0, None):
            actual_empty = empty if version == veq else (
                size.empty_request_frame(version, client_id, replica_id, rack), size.empty_response_frame(version))
            actual_scalable = max(0, _scalable(actual_req, actual_resp, actual_empty, records, missing))
        # The incremental equivalent is a full fetch too where a session starts (and after a session error), and
        # grows the same way. Not when the client actually sent an incremental request: then the equivalent is
        # full only because the session began before the capture, and it lists just the partitions that
        # request did (the changed ones, whose number does not grow).
        inc_scalable = 0
        if equivalent_full and kind != INCREMENTAL and outcome.error_code == 0:
            inc_scalable = max(0, _scalable(inc_req, inc_resp, empty, records, missing))

        category, cause = self._book(ex, kind)
        self.exchanges += 1
        self._req_runs = self._resp_runs = None   # this exchange's (not kept: a parked model holds no scratch)
        return _new_savings(
            ex.file, ex.request_frame, ex.ts, ex.client, ex.client_id, ex.broker, version, veq, kind, category, cause,
            ex.error_code, len(wanted), len(to_send), len(forgotten), len(outcome.partitions), actual_req,
            actual_resp, full_req, full_resp, inc_req, inc_resp, records, reenc_req, reenc_resp, missing,
            actual_scalable, full_scalable, inc_scalable)

    def _response_sizes(self, version, veq, captured, seen, order, outcome, out_keys, full_topics, reenc_resp,
                        recs, aborted, diverging) -> tuple[int, int]:
        """Full and incremental response sizes when client and engine keys correspond one to one and every
        partition the response mentions is wanted: topic entries from the keys, the rest summed per partition.

        Full: every wanted partition in request order (a full response follows the request), the ones the
        captured response lacks as unchanged entries (no records): the full response's topic entries with the
        mentioned partitions' values. Incremental: the engine's partitions, with the values they were given
        (a mentioned partition's are its captured row's; the others carry no records and no diverging epoch).
        """
        _, mentioned, mrows = seen
        if (version == veq and len(mentioned) == len(captured) == len(order)
                and list(map(_ck, mentioned)) == order):
            full_resp = reenc_resp    # the captured response is the full one: same entries, same order
        else:
            if len(mentioned) == len(captured):   # no partition repeated: the captured values are the present ones
                values = size.response_values_size(veq, recs, aborted, len(diverging))
            else:
                values = size.response_values_size(veq, list(map(_records_bytes, mrows)),
                                                   [a for a in map(_aborted, mrows) if a > 0],
                                                   len([d for d in map(_diverging_epoch, mrows) if d >= 0]))
            full_resp = size.empty_response_frame(veq) + full_topics + values
        if not out_keys:
            return full_resp, size.empty_response_frame(veq)   # the session returns nothing
        results = list(map(_second, outcome.partitions))
        keys = list(map(_topic_id if veq >= 13 else _topic, out_keys))
        inc_aborted = []
        if aborted:   # aborted transactions come from the captured row only
            row_of = dict(zip(mentioned, mrows))
            part_of = self.part_of
            for t in out_keys:
                r = row_of.get(part_of.get(id(t)))
                if r is not None and r.aborted_transactions > 0:
                    inc_aborted.append(r.aborted_transactions)
        inc_resp = (size.empty_response_frame(veq) + size.response_topics_size(veq, keys)
                    + size.response_values_size(veq, list(map(_records_size, results)), inc_aborted,
                                                _count_diverging(list(map(_diverging_epoch, results)))))
        return full_resp, inc_resp

    def _response_sizes_any(self, version, veq, captured, seen, order, outcome, reenc_resp) -> tuple[int, int]:
        """Full and incremental response sizes in general, entry by entry (see _response_sizes)."""
        ids = veq >= 13
        tips = self.tips
        rows = {}   # by engine key (TopicIdPartition equality): the first row's key, the last row
        for hit, r in zip(seen[0], captured):
            rows[hit[1]] = r
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
        return full_resp, inc_resp

    def _book(self, ex: Exchange, kind: str) -> tuple[str, str | None]:
        """Realised (a working session), potential (no session at all) or lost (a session that failed). What a
        realised exchange still carries beyond its incremental equivalent is its excess (savings.Tally)."""
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
            return LOST, REFUSED              # no session: named at the end (savings.estimator.refusal_cause)
        self.full_since_incremental += 1
        if first or self.full_since_incremental == 1:
            return LOST, "session_start"
        return LOST, "churn"                  # a new session again without ever going incremental


_FULL_MEMO_KEYS = 64   # full requests of at most this many partitions have their sizes remembered by name


def _full_sizes(shape: tuple, keys: list) -> tuple[int, int]:
    """The full request's frame size and its response's topic entries, for the wire keys of the wanted partitions
    in order; ``shape``: (version, client id, replica id, rack id)."""
    version, client_id, replica_id, rack = shape
    return (size.request_frame_size(version, client_id, replica_id, rack, keys),
            size.response_topics_size(version, keys))


@lru_cache(maxsize=1024)
def _full_sizes_by_name(shape: tuple, order: tuple[ClientKey, ...]) -> tuple[int, int]:
    """_full_sizes by name, where they depend on the client keys alone: remembered across models (the connections
    of a session storm, a model each, all fetch the same few partitions)."""
    return _full_sizes(shape, [tp.topic for tp in order])


def _scalable(request: int, response: int, empty: tuple[int, int], records: int, missing: bool) -> int:
    """The bytes of a request and its response that grow with the partition count: all but the empty frames
    (`empty`: request, response, at the exchange's version) and the records; the request's alone when the
    response was not captured."""
    if missing:
        return request - empty[0]
    return request - empty[0] + response - empty[1] - records


def _keys(version: int, rows) -> list:
    """The wire topic key of each decoded row (name before v13, id string from v13)."""
    return list(map(_row_topic_id if version >= 13 else _row_topic, rows))
