"""Incremental-fetch savings (KIP-227): exact bytes per client and broker, and how they grow with partitions.

    est = SavingsEstimator()
    for ex in exchanges:          # Exchange objects in request order (streaming: per-connection state only)
        est.feed(ex)              # -> ExchangeSavings for a Fetch exchange, None otherwise
    est.result().to_json()        # the `savings` object of `analyze --format json` (design.md)

Every Fetch exchange gets three sizes in each direction: what was captured, its full-fetch equivalent (every
session partition) and its incremental equivalent (what a working session would carry, decided by the session
engine: see savings_model). Sizes are whole frames, encoded at the captured version, or at v7 for older
exchanges (sessions start at v7; the report counts them in `estimated_at_v7`).

Where the saving (`saved_bytes` = actual - incremental, both directions) is booked; potential + lost + excess
= saved_bytes exactly:
- potential: sessionless clients (epoch -1 or Fetch < v7) would save `actual - incremental`;
- lost: session-capable clients whose sessions fail (errors 70/71/106, churn, no cache slot) pay
  `actual - incremental` more than a working session, by cause;
- excess: working incremental sessions that still carry more than their incremental equivalent, split by
  direction. Requests: a client that resends unchanged partitions. Responses: usually 0 against Kafka; it can be
  negative when a broker lists the returned partitions in fewer topic entries than Kafka's session order (which
  moves every returned partition to the end) would;
- realised: what working incremental sessions already save, `full - actual` (`realised_bytes`); not part of
  `saved_bytes`, which is what is still to save (their own `actual - incremental` is the excess above).
Record bytes are the same either way: they are reported apart, and shares are given both of the fetch metadata
bytes (everything but records) and of all fetch bytes.

Projection: the same workload with 10x and 100x the partitions and the same change rate. "The same change rate"
means the number of partitions that change per fetch (and their records) stays the same, while a full fetch
(request and response) carries every partition. So every full fetch, actual or equivalent, grows by its
partition-proportional bytes (the frame beyond its empty frame and records: `*_scalable_bytes`), and incremental
fetches do not grow. The incremental equivalent has full fetches too (the one that creates each session, and
any after a session error), so it grows by those; a client whose traffic is its incremental equivalent
projects a saving of 0 at any factor.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import itemgetter

from fetchtool.exchange import FETCH, Exchange

from fetchtool.analysis.model import JSON_LIST
from fetchtool.analysis.savings.model import (CLOSE, FULL, INCREMENTAL, LOST, POTENTIAL, REALISED, REFUSED,
                                              SESSIONLESS, ByteSums, ExchangeSavings, Replay, StreamModel)
from fetchtool.analysis.savings.state import KeyDirectory
from fetchtool.analysis.tracking.kraft import is_kraft_voter_fetch
from fetchtool.analysis.tracking.tracker import grants_session, host_of

PROJECTIONS = (10, 100)
# Closed connections whose models are kept for a later connection that continues their session (clients keep a
# session across reconnects): as many as Kafka's default cache has slots (max.incremental.fetch.session.cache.
# slots), since an older session has most likely been evicted meanwhile. Older ones are released (memory).
PARKED_MODELS = 1000
CACHE_FULL, NOT_GRANTED = "cache_full", "not_granted"


def refusal_cause(broker: str, granting: frozenset[str]) -> str:
    """A refused session is a full cache only on a broker shown to keep sessions (tracking.grants_session);
    elsewhere the broker has no sessions to give (tansu, noida-db, or no cache slots)."""
    return CACHE_FULL if broker in granting else NOT_GRANTED
KINDS = (SESSIONLESS, FULL, INCREMENTAL, CLOSE)


class Tally(ByteSums):
    """Sums over a set of exchanges (one client, one broker, or all)."""

    __slots__ = ("exchanges", "actual_request_bytes", "actual_response_bytes", "full_request_bytes",
                 "full_response_bytes", "incremental_request_bytes", "incremental_response_bytes", "records_bytes",
                 "realised_bytes", "potential_bytes", "lost_bytes", "lost_by_cause", "kinds", "estimated_at_v7",
                 "responses_missing", "actual_scalable_bytes", "full_scalable_bytes", "incremental_scalable_bytes",
                 "excess_request_bytes", "excess_response_bytes", "reencode_checked", "reencode_mismatches",
                 "versions", "refused_by_broker")

    def __init__(self) -> None:
        self.exchanges = 0
        self.actual_request_bytes = self.actual_response_bytes = 0
        self.full_request_bytes = self.full_response_bytes = 0
        self.incremental_request_bytes = self.incremental_response_bytes = 0
        self.records_bytes = 0
        self.realised_bytes = self.potential_bytes = self.lost_bytes = 0
        self.excess_request_bytes = self.excess_response_bytes = 0
        self.lost_by_cause: dict[str, int] = {}
        self.refused_by_broker: dict[str, int] = {}  # lost to refused sessions, named by refusal_cause at the end
        self.kinds: dict[str, int] = {}
        self.estimated_at_v7 = 0
        self.responses_missing = 0
        self.actual_scalable_bytes = self.full_scalable_bytes = self.incremental_scalable_bytes = 0
        self.reencode_checked = self.reencode_mismatches = 0
        self.versions: dict[int, int] = {}

    def merge(self, other: Tally) -> None:
        """Add another tally's sums (the Spark engine's per-broker estimates)."""
        for name in self.__slots__:
            mine, theirs = getattr(self, name), getattr(other, name)
            if isinstance(theirs, dict):
                for k, v in theirs.items():
                    mine[k] = mine.get(k, 0) + v
            else:
                setattr(self, name, mine + theirs)

    def add(self, s: ExchangeSavings) -> None:
        self.exchanges += 1
        self.actual_request_bytes += s.actual_request_bytes
        self.actual_response_bytes += s.actual_response_bytes
        self.full_request_bytes += s.full_request_bytes
        self.full_response_bytes += s.full_response_bytes
        self.incremental_request_bytes += s.incremental_request_bytes
        self.incremental_response_bytes += s.incremental_response_bytes
        self.records_bytes += s.records_bytes
        self.kinds[s.kind] = self.kinds.get(s.kind, 0) + 1
        self.versions[s.version] = self.versions.get(s.version, 0) + 1
        if s.category == REALISED:
            self.realised_bytes += s.full_bytes - s.actual_bytes
            self.excess_request_bytes += s.actual_request_bytes - s.incremental_request_bytes
            self.excess_response_bytes += s.actual_response_bytes - s.incremental_response_bytes
        elif s.category == POTENTIAL:
            self.potential_bytes += s.saved_bytes
        elif s.category == LOST:
            self.lost_bytes += s.saved_bytes
            cause = s.cause or "other"
            if cause == REFUSED:
                self.refused_by_broker[s.broker] = self.refused_by_broker.get(s.broker, 0) + s.saved_bytes
            else:
                self.lost_by_cause[cause] = self.lost_by_cause.get(cause, 0) + s.saved_bytes
        if s.equivalent_version != s.version:
            self.estimated_at_v7 += 1
        if s.response_missing:
            self.responses_missing += 1
        self.actual_scalable_bytes += s.actual_scalable_bytes
        self.full_scalable_bytes += s.full_scalable_bytes
        self.incremental_scalable_bytes += s.incremental_scalable_bytes
        self.reencode_checked += 1
        if s.reencoded_request_bytes != s.actual_request_bytes or (
                s.reencoded_response_bytes is not None and s.reencoded_response_bytes != s.actual_response_bytes):
            self.reencode_mismatches += 1

    @property
    def excess_bytes(self) -> int:
        return self.excess_request_bytes + self.excess_response_bytes

    def projection(self, factor: int) -> dict:
        """The figures with `factor` times the partitions at the same change rate (module docstring)."""
        grow = factor - 1
        actual = self.actual_bytes + grow * self.actual_scalable_bytes
        full = self.full_bytes + grow * self.full_scalable_bytes
        incremental = self.incremental_bytes + grow * self.incremental_scalable_bytes
        return {"actual_bytes": actual, "full_bytes": full, "incremental_bytes": incremental,
                "saved_bytes": actual - incremental}

    def lost_causes(self, granting: frozenset[str]) -> dict[str, int]:
        causes = dict(self.lost_by_cause)
        for broker, lost in self.refused_by_broker.items():
            cause = refusal_cause(broker, granting)
            causes[cause] = causes.get(cause, 0) + lost
        return dict(sorted(causes.items()))

    def to_json(self, duration_s: float | None, granting: frozenset[str] = frozenset()) -> dict:
        actual, records, saved = self.actual_bytes, self.records_bytes, self.saved_bytes
        metadata = actual - records

        def share(part: int, whole: int) -> float | None:
            return round(part / whole, 4) if whole > 0 else None

        def rate(b: int, seconds: float) -> float | None:
            return round(b / duration_s * seconds, 1) if duration_s else None

        projection = {}
        for k in PROJECTIONS:
            p = self.projection(k)
            p["saved_bytes_per_hour"] = rate(p["saved_bytes"], 3600)
            projection[f"{k}x"] = p
        return {
            "exchanges": self.exchanges,
            "actual_request_bytes": self.actual_request_bytes,
            "actual_response_bytes": self.actual_response_bytes,
            "full_request_bytes": self.full_request_bytes,
            "full_response_bytes": self.full_response_bytes,
            "incremental_request_bytes": self.incremental_request_bytes,
            "incremental_response_bytes": self.incremental_response_bytes,
            "records_bytes": records,
            "saved_bytes": saved,
            "actual_bytes": actual,
            "full_bytes": self.full_bytes,
            "incremental_bytes": self.incremental_bytes,
            "metadata_bytes": metadata,
            "incremental_metadata_bytes": self.incremental_bytes - records,
            "saved_share_of_metadata": share(saved, metadata),
            "saved_share_of_all": share(saved, actual),
            "realised_bytes": self.realised_bytes,
            "potential_bytes": self.potential_bytes,
            "lost_bytes": self.lost_bytes,
            "lost_by_cause": self.lost_causes(granting),
            "excess_bytes": self.excess_bytes,
            "excess_request_bytes": self.excess_request_bytes,
            "excess_response_bytes": self.excess_response_bytes,
            "saved_bytes_per_second": rate(saved, 1),
            "saved_bytes_per_hour": rate(saved, 3600),
            "actual_bytes_per_hour": rate(actual, 3600),
            "incremental_bytes_per_hour": rate(self.incremental_bytes, 3600),
            "realised_bytes_per_hour": rate(self.realised_bytes, 3600),
            "projection": projection,
            "requests": {k: self.kinds[k] for k in KINDS if k in self.kinds},
            "fetch_versions": {str(v): n for v, n in sorted(self.versions.items())},
            "estimated_at_v7": self.estimated_at_v7,
            "responses_missing": self.responses_missing,
            "reencode_mismatches": self.reencode_mismatches,
        }


@dataclass
class SavingsResult:
    total: Tally
    per_client: dict[tuple[str, str | None], Tally]  # (host, client id), as analyze's Clients table
    per_broker: dict[str, Tally]
    duration_s: float | None   # capture time: the sum of each file's first-to-last timestamp span
    snapshot_exchanges: int = 0
    notes: list[str] = field(default_factory=list)
    granting: frozenset[str] = frozenset()  # brokers shown to keep sessions (refusal_cause)
    addresses: dict[tuple[str, str | None], dict[str, tuple]] = field(default_factory=dict)  # see SavingsEstimator
    address_counts: dict[tuple[str, str | None], int] = field(default_factory=dict)  # every address, counted

    def connections(self, key: tuple[str, str | None]) -> list[str]:
        """A client's ip:port in the order it first fetched on them."""
        seen = self.addresses.get(key, {})
        return sorted(seen, key=lambda a: (seen[a], a))

    def to_json(self) -> dict:
        d, g = self.duration_s, self.granting
        clients = []
        for (host, client_id), t in sorted(self.per_client.items(),
                                           key=lambda kv: (-kv[1].saved_bytes, kv[0][0], kv[0][1] or "")):
            addresses = self.connections((host, client_id)) or [host]
            # contract: `client` is an ip:port (the first connection's); `addresses` (extension) lists them all
            row = {"client": addresses[0], "client_id": client_id, "host": host,
                   "addresses": addresses[:JSON_LIST], **t.to_json(d, g)}
            total = self.address_counts.get((host, client_id), len(addresses))
            if total > JSON_LIST:  # a client of 100,000 connections: the first ones, and how many
                row["addresses_total"] = total
            clients.append(row)
        brokers = [{"broker": b, **t.to_json(d, g)}
                   for b, t in sorted(self.per_broker.items(), key=lambda kv: (-kv[1].saved_bytes, kv[0]))]
        return {"total": self.total.to_json(d, g), "per_client": clients, "per_broker": brokers,
                "duration_s": None if d is None else round(d, 3), "notes": list(self.notes)}


class SavingsEstimator:
    """Feed exchanges in request order; `result()` at the end. Keeps one StreamModel per connection."""

    def __init__(self, only: Callable[[Exchange], bool] | None = None) -> None:
        self.only = only  # the exchanges to count (--client / --broker); every exchange still shows who grants
        self.streams: dict[tuple[str, str], StreamModel] = {}   # (client ip:port, broker)
        self.rng = random.Random(0)  # the models' private caches draw their session ids from it
        self.directory = KeyDirectory()  # the partition keys the models share
        self._by_session: dict[tuple, StreamModel | Replay] = {}  # (host, client id, broker, session id)
        # (host, client id, broker) -> sums: one add per exchange; the total, per client and per broker sums are
        # made from these when read (folded)
        self.tallies: dict[tuple[str, str | None, str], Tally] = {}
        # (host, client id) -> ip:port -> (first request ts, frame): orders the connections the same way whichever
        # engine split the exchanges (a min over parts, not the order the parts arrive in)
        self.addresses: dict[tuple[str, str | None], dict[str, tuple]] = {}
        self.address_sets: dict[tuple[str, str | None], set[str]] = {}  # every address (the count)
        self._counted: dict[tuple[str, str | None], int] = {}  # their counts, once release() dropped them
        self.spans: dict[str, list[float]] = {}   # file -> [first, last] timestamp
        self.snapshot_exchanges = 0
        self.model_errors = 0
        self.granting: set[str] = set()  # brokers shown to keep sessions (tracking.grants_session)
        # (host, client id, broker) -> [potential bytes, fetch bytes]: what sessionless clients could save
        self.per_pair: dict[tuple, list[int]] = {}
        self.open_conns: dict[int, tuple[str, str]] = {}  # connection id -> its streams key, while it is open
        # id(model) -> (the model, its _by_session keys); holding the model keeps its id from being reused. A
        # closed connection's model may be kept as a Replay (model.Replay) in its place, here and in _by_session.
        self._session_keys: dict[int, tuple[StreamModel | Replay, list[tuple]]] = {}
        # id(model) -> closed connection's model, oldest first (an OrderedDict: popping the oldest of a plain dict
        # again and again walks over its deleted entries)
        self.parked: OrderedDict[int, StreamModel | Replay] = OrderedDict()
        self._released: set[int] = set()  # hashes of the _by_session keys of released models
        self.released_misses = 0  # continuations of a session whose model had been released

    def release(self) -> None:
        """Nothing more will be fed: the per-connection models and address sets go (result() still holds; only
        `per_pair` and the sums are read after this). Memory for the findings' cache replay that follows."""
        counts = {k: len(v) for k, v in self.address_sets.items()}
        self.address_sets = {}
        self._counted = counts
        self.drop_models()

    def drop_models(self) -> None:
        """Nothing more will be fed: the per-connection models, what finds them and the exchange filter go; the
        sums stay, and merge() still takes them (what the Spark engine's executors send its driver: the models
        were most of the pickle, and a filter made for the run need not travel)."""
        self.only = None
        self.streams.clear()
        self.directory.clear()
        self.parked.clear()
        self._by_session.clear()
        self._session_keys.clear()
        self._released.clear()
        self.open_conns.clear()

    def connection_ended(self, conn: int) -> None:
        """A connection closed (decoder.DecodeRun.ended): its model leaves `streams`; a model holding a session
        waits among the last PARKED_MODELS closed ones for a connection that continues it, then is released."""
        key = self.open_conns.pop(conn, None)
        if key is None:
            return
        model = self.streams.pop(key, None)
        if model is None or id(model) not in self._session_keys:
            return
        parked: StreamModel | Replay = model
        if model.fed is not None and not model.continued:
            # kept as its exchanges (Replay), and the model freed now, while its memory is still in the caches
            parked = Replay(model)
            self._put_in_place(model, parked)
        self.parked[id(parked)] = parked
        if len(self.parked) > PARKED_MODELS:
            old = self.parked.popitem(last=False)[1]
            for k in self._session_keys.pop(id(old))[1]:
                if self._by_session.get(k) is old:
                    del self._by_session[k]
                    self._released.add(hash(k))

    def feed(self, ex: Exchange) -> ExchangeSavings | None:
        if grants_session(ex):
            self.granting.add(ex.broker)
        if self.only is not None and not self.only(ex):
            return None
        span = self.spans.get(ex.file)
        for t in (ex.ts, ex.response_ts):
            if t is not None:
                if span is None:
                    span = self.spans[ex.file] = [t, t]
                elif t < span[0]:
                    span[0] = t
                elif t > span[1]:
                    span[1] = t
        if ex.api_key != FETCH:
            self.snapshot_exchanges += 1
            return None
        if is_kraft_voter_fetch(ex):
            return None  # Raft replication of the metadata log: sessions could never apply to it
        key = (ex.client, ex.broker)
        model = self.streams.get(key)
        if model is None:
            model = self._adopt(ex)
            self.streams[key] = model
        self.open_conns[ex.conn] = key
        try:
            s = model.feed(ex)
        except Exception:  # noqa: BLE001 - one odd exchange must not stop the report; start the stream afresh
            self.model_errors += 1
            self.streams[key] = StreamModel(ex.client, ex.broker, self.rng, self.directory)
            return None
        host = host_of(ex.client)
        if ex.response_session_id:
            skey = (host, ex.client_id, ex.broker, ex.response_session_id)
            if self._by_session.get(skey) is not model:
                self._by_session[skey] = model
                self._session_keys.setdefault(id(model), (model, []))[1].append(skey)
        pair = self.per_pair.get(pk := (host, ex.client_id, ex.broker))
        if pair is None:
            pair = self.per_pair[pk] = [0, 0]
        if s.category == POTENTIAL:
            pair[0] += s.saved_bytes
        pair[1] += s.actual_bytes
        tally = self.tallies.get(pk)
        if tally is None:
            tally = self.tallies[pk] = Tally()
        tally.add(s)
        ck = (pk[0], ex.client_id)
        every = self.address_sets.get(ck)
        if every is None:
            every = self.address_sets[ck] = set()
        if ex.client not in every:
            every.add(ex.client)
            seen = self.addresses.setdefault(ck, {})
            seen[ex.client] = (ex.ts if ex.ts is not None else float("inf"), ex.file, ex.request_frame or 0)
            if len(seen) >= 2 * JSON_LIST:
                _keep_first(seen)
        return s

    def folded(self) -> tuple[Tally, dict[tuple[str, str | None], Tally], dict[str, Tally]]:
        """The sums in all, per client (host, client id) and per broker, from the per (client, broker) sums."""
        total = Tally()
        per_client: dict[tuple[str, str | None], Tally] = {}
        per_broker: dict[str, Tally] = {}
        for (host, client_id, broker), tally in self.tallies.items():
            total.merge(tally)
            per_client.setdefault((host, client_id), Tally()).merge(tally)
            per_broker.setdefault(broker, Tally()).merge(tally)
        return total, per_client, per_broker

    def merge(self, other: SavingsEstimator) -> None:
        """Fold in an estimate of other streams (state is per client stream, so per-broker estimates add up to
        the one-pass estimate). The other's per-stream models are not taken: only its results are."""
        for names, tally in other.tallies.items():
            self.tallies.setdefault(names, Tally()).merge(tally)
        for file, (start, end) in other.spans.items():
            span = self.spans.setdefault(file, [start, end])
            span[0], span[1] = min(span[0], start), max(span[1], end)
        for key, seen in other.addresses.items():
            known = self.addresses.setdefault(key, {})
            for address, first in seen.items():
                known[address] = min(known.get(address, first), first)
            if len(known) >= 2 * JSON_LIST:
                _keep_first(known)
        for key, every in other.address_sets.items():
            self.address_sets.setdefault(key, set()).update(every)
        self.snapshot_exchanges += other.snapshot_exchanges
        self.model_errors += other.model_errors
        self.released_misses += other.released_misses
        self.granting |= other.granting
        for key, (potential, actual) in other.per_pair.items():
            pair = self.per_pair.setdefault(key, [0, 0])
            pair[0] += potential
            pair[1] += actual

    def _adopt(self, ex: Exchange) -> StreamModel:
        """A new connection that continues a session of an earlier one (clients keep their session across
        reconnects) continues that connection's model; anything else starts a new one."""
        if ex.session_id and ex.session_epoch is not None and ex.session_epoch > 0:
            skey = (host_of(ex.client), ex.client_id, ex.broker, ex.session_id)
            found = self._by_session.get(skey)
            if found is not None:
                self.parked.pop(id(found), None)
                if isinstance(found, Replay):
                    try:
                        model = self._replayed(found)
                    except Exception:  # noqa: BLE001 - as feed: start the stream afresh (its figures were counted)
                        self.model_errors += 1
                        return StreamModel(ex.client, ex.broker, self.rng, self.directory)
                else:
                    model = found
                # (maybe open on two connections at once: never kept as a Replay, which would miss the other's)
                model.continued = True
                return model
            if self._released and hash(skey) in self._released:
                self.released_misses += 1
        return StreamModel(ex.client, ex.broker, self.rng, self.directory)

    def _replayed(self, kept: Replay) -> StreamModel:
        """The model a Replay stands for, made again, in its place."""
        model = kept.model(self.rng, self.directory)
        self._put_in_place(kept, model)
        return model

    def _put_in_place(self, old: StreamModel | Replay, new: StreamModel | Replay) -> None:
        """`new` stands where `old` stood: under old's session keys, in _session_keys and _by_session."""
        session_keys = self._session_keys.pop(id(old))[1]
        self._session_keys[id(new)] = (new, session_keys)
        for k in session_keys:
            if self._by_session.get(k) is old:
                self._by_session[k] = new

    def result(self) -> SavingsResult:
        notes = []
        total, per_client, per_broker = self.folded()
        if total.estimated_at_v7:
            notes.append(f"{_count(total.estimated_at_v7, 'exchange')} used Fetch < v7 (no sessions): their full "
                         f"and incremental equivalents are sized at Fetch v7.")
        if total.responses_missing:
            notes.append(f"{_count(total.responses_missing, 'request')} without a captured response: their "
                         f"response bytes are left out.")
        if total.reencode_mismatches:
            notes.append(f"{total.reencode_mismatches:,} of {total.reencode_checked:,} exchanges come out "
                         f"bigger or smaller when fetchtool re-encodes them (it does not keep every field, "
                         f"e.g. tagged fields); the difference is added to both the full and the incremental "
                         f"figures, so the saving is not changed by it.")
        if self.released_misses:
            notes.append(f"{_count(self.released_misses, 'connection')} continued a session last used more than "
                         f"{PARKED_MODELS:,} closed connections earlier: modelled as new streams.")
        if self.model_errors:
            notes.append(f"{_count(self.model_errors, 'exchange')} could not be modelled: left out of the estimate.")
        if self.snapshot_exchanges:
            notes.append(f"{_count(self.snapshot_exchanges, 'FetchSnapshot exchange')} are not part of the estimate "
                         f"(no sessions in KIP-630).")
        duration = sum(last - first for first, last in self.spans.values())
        return SavingsResult(total, per_client, per_broker, duration or None,
                             self.snapshot_exchanges, notes, frozenset(self.granting), self.addresses,
                             self._counted or {k: len(v) for k, v in self.address_sets.items()})


_first_use = itemgetter(1, 0)   # (first use, address) of an (address, first use) item: the order addresses are listed in


def _keep_first(seen: dict[str, tuple]) -> None:
    """Keeps the JSON_LIST addresses first used (the ones a report lists): the others can never come back
    among them, since an address's first use only moves earlier when parts merge, and merged parts keep theirs."""
    first = sorted(seen.items(), key=_first_use)[:JSON_LIST]
    seen.clear()
    seen.update(first)


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def estimate(exchanges) -> SavingsResult:
    """Run the estimator over an iterable of Exchange (other items, e.g. orphan responses, are skipped)."""
    est = SavingsEstimator()
    for ex in exchanges:
        if isinstance(ex, Exchange):
            est.feed(ex)
    return est.result()
